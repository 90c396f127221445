// Layer normalization, shared by the CPU and GPU tests (test_transformer.cpp / .cu):
//  - layer_norm and add_layer_norm against a double-precision loop, in float, double,
//    bfloat16 (with float weight and bias) and half, on edge shapes (empty, one value, odd
//    lengths that take the one-value-a-load path, rows of 768 and 1000, a transposed input,
//    no weight, no bias);
//  - dx, dweight and dbias against the double-precision formulas, the same bits twice;
//    gradcheck against central differences in double, also through add_layer_norm;
//  - nn::LayerNorm (options, shapes, a 16-bit input), nn::GELU's approximations; errors.
#pragma once

#include "gradcheck.hpp"
#include "random_values.hpp"
#include "reference.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// y = layer_norm(x) (with weight w and bias b where given) row by row in double.
inline std::vector<double> layer_norm_reference(const std::vector<double>& x, std::int64_t cols,
                                                const std::vector<double>* w, const std::vector<double>* b,
                                                double eps) {
  std::vector<double> y(x.size());
  const std::int64_t rows = cols == 0 ? 0 : std::int64_t(x.size()) / cols;
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += x[std::size_t(r * cols + j)];
    mean /= double(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += std::pow(x[std::size_t(r * cols + j)] - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / double(cols) + eps);
    for (std::int64_t j = 0; j < cols; ++j) {
      double v = (x[std::size_t(r * cols + j)] - mean) * rstd;
      if (w) v *= (*w)[std::size_t(j)];
      if (b) v += (*b)[std::size_t(j)];
      y[std::size_t(r * cols + j)] = v;
    }
  }
  return y;
}

template <class T, int R, class D>
std::vector<double> doubles(const et::Tensor<T, R, D>& t) {
  return et::eval(et::cast<double>(t)).to_vector();
}

/// Forward and backward of layer_norm (and of add_layer_norm) on x [rows, cols] of T with
/// weight and bias of P, against doubles; `tolerance` relative to the largest value.
template <class D, class T, class P>
void check_layer_norm_shape(std::int64_t rows, std::int64_t cols, double tolerance, bool transposed = false) {
  CAPTURE(rows, cols, transposed);
  const auto make = [](std::int64_t n, std::uint64_t seed, double lo, double hi) {
    return random_values<double>(std::size_t(n), seed, lo, hi);
  };
  const std::vector<double> w = make(cols, 31, 0.5, 1.5), b = make(cols, 32, -0.5, 0.5);
  const auto weight = et::eval(et::cast<P>(et::from_vector(D{}, w, {cols})));
  const auto bias = et::eval(et::cast<P>(et::from_vector(D{}, b, {cols})));
  et::Tensor<T, 2, D> x = transposed
                              ? et::eval(et::cast<T>(et::from_vector(D{}, make(rows * cols, 33, -3, 3), {cols, rows})))
                                    .transpose(0, 1)
                              : et::eval(et::cast<T>(et::from_vector(D{}, make(rows * cols, 33, -3, 3), {rows, cols})));
  const auto xs = doubles(et::eval(x)), ws = doubles(weight), bs = doubles(bias);
  const auto want = layer_norm_reference(xs, cols, &ws, &bs, 1e-5);
  check_scaled_close(doubles(et::layer_norm(x, weight, bias)), want, tolerance, "layer_norm differs from doubles");
  check_scaled_close(doubles(et::layer_norm(x)), layer_norm_reference(xs, cols, nullptr, nullptr, 1e-5), tolerance,
                     "layer_norm without weight and bias differs from doubles");
  check_scaled_close(doubles(et::layer_norm(x, weight, et::Tensor<P, 1, D>{})),
                     layer_norm_reference(xs, cols, &ws, nullptr, 1e-5), tolerance,
                     "layer_norm without bias differs from doubles");
  // The residual form: h rounded to T, then normalized.
  const auto r = et::eval(et::cast<T>(et::from_vector(D{}, make(rows * cols, 34, -1, 1), {rows, cols})));
  const auto [h, y] = et::add_layer_norm(x, r, weight, bias);
  const auto h_want = doubles(et::eval(et::cast<T>(et::cast<double>(x) + et::cast<double>(r))));
  CHECK(doubles(h) == h_want);
  check_scaled_close(doubles(y), layer_norm_reference(h_want, cols, &ws, &bs, 1e-5), tolerance,
                     "add_layer_norm differs from doubles");
  // Gradients: dx, dweight, dbias against the formulas in double.
  const std::vector<double> g = make(rows * cols, 35, -1, 1);
  const auto run = [&] {
    auto xl = et::eval(x);
    auto wl = weight.clone(), bl = bias.clone();
    xl.requires_grad_(true), wl.requires_grad_(true), bl.requires_grad_(true);
    auto out = et::layer_norm(xl, wl, bl);
    out.backward(et::eval(et::cast<T>(et::from_vector(D{}, g, {rows, cols}))));
    return std::tuple{doubles(xl.grad()), doubles(wl.grad()), doubles(bl.grad())};
  };
  const auto [dx, dw, db] = run();
  std::vector<double> dx_want(xs.size()), dw_want(std::size_t(cols), 0.0), db_want(std::size_t(cols), 0.0);
  for (std::int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += xs[std::size_t(i * cols + j)];
    mean /= double(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += std::pow(xs[std::size_t(i * cols + j)] - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / double(cols) + 1e-5);
    double a = 0, c = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t k = std::size_t(i * cols + j);
      const double xhat = (xs[k] - mean) * rstd, wdy = ws[std::size_t(j)] * g[k];
      a += wdy, c += wdy * xhat;
      dw_want[std::size_t(j)] += g[k] * xhat, db_want[std::size_t(j)] += g[k];
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t k = std::size_t(i * cols + j);
      const double xhat = (xs[k] - mean) * rstd;
      dx_want[k] = rstd * (ws[std::size_t(j)] * g[k] - a / double(cols) - xhat * c / double(cols));
    }
  }
  check_scaled_close(dx, dx_want, tolerance, "layer_norm's dx differs from doubles");
  check_scaled_close(dw, dw_want, tolerance, "layer_norm's dweight differs from doubles");
  check_scaled_close(db, db_want, tolerance, "layer_norm's dbias differs from doubles");
  const auto [dx2, dw2, db2] = run();  // sums in a fixed order: the same bits
  CHECK(dx2 == dx);
  CHECK(dw2 == dw);
  CHECK(db2 == db);
}

template <class D>
void check_layer_norm_forms() {
  // On CUDA, rows of up to 8 chunks of 32 vectors (1024 floats, 2048 bfloat16; 512 doubles)
  // take the kernels that hold a row in registers, wider ones (4100) the looping ones; the
  // backward's register kernel takes up to 1024 floats or bfloat16 (1288 loops); 5000 rows
  // make each warp stride over several.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{7, 13}, {1, 1}, {0, 5}, {3, 0}, {3, 768}, {5, 1000},
                                   {2, 130}, {300, 64}, {2, 4100}, {5000, 40}}) {
    check_layer_norm_shape<D, float, float>(rows, cols, 2e-5);
    check_layer_norm_shape<D, double, double>(rows, cols, 1e-12);
  }
  check_layer_norm_shape<D, float, float>(9, 24, 2e-5, true);
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{4, 768}, {3, 130}, {64, 256}, {3, 1288}, {2, 2056}}) {
    check_layer_norm_shape<D, et::bfloat16, float>(rows, cols, 3e-2);
    check_layer_norm_shape<D, et::half, float>(rows, cols, 5e-3);
    check_layer_norm_shape<D, et::bfloat16, et::bfloat16>(rows, cols, 3e-2);
  }
  // A 3-d input, normalized over its last axis.
  const auto x3 = et::rand<float>(D{}, {2, 3, 40}, 5);
  const auto flat = et::eval(x3.reshape({6, 40}));
  CHECK(et::layer_norm(x3).reshape({6, 40}).to_vector() == et::layer_norm(flat).to_vector());
}

template <class D>
void check_layer_norm_gradcheck() {
  const auto x = grad_input<2>({3, 7}, 41), r = grad_input<2>({3, 7}, 44);
  const auto w = grad_input<1>({7}, 42, 0.5, 1.5), b = grad_input<1>({7}, 43);
  gradcheck<D>("layer_norm", [](const auto& a, const auto& wt, const auto& bt) { return et::layer_norm(a, wt, bt); },
               x, w, b);
  gradcheck<D>("layer_norm without affine", [](const auto& a) { return et::layer_norm(a, 1e-3); }, x);
  // Both outputs of the residual form carry gradients: h goes on down the residual stream.
  gradcheck<D>("add_layer_norm",
               [](const auto& a, const auto& res, const auto& wt, const auto& bt) {
                 const auto [h, y] = et::add_layer_norm(a, res, wt, bt);
                 return et::eval(y + 0.5 * h);
               },
               x, r, w, b);
}

template <class D>
void check_layer_norm_module_and_errors() {
  et::nn::LayerNorm<float, D> ln(D{}, 16);
  REQUIRE(ln.parameters().size() == 2);
  const auto x = et::rand<float>(D{}, {4, 16}, 6);
  CHECK(ln(x).to_vector() == et::layer_norm(x).to_vector());  // weight 1, bias 0
  const auto [h, y] = ln.forward_add(x, x);
  CHECK(y.to_vector() == et::layer_norm(et::eval(x + x)).to_vector());
  CHECK(h.to_vector() == et::eval(x + x).to_vector());
  const auto xb = et::eval(et::cast<et::bfloat16>(x));
  CHECK(ln(xb).shape() == xb.shape());  // a float module takes bfloat16 input
  et::nn::LayerNorm<float, D> plain(D{}, 16, {.eps = 1e-6, .elementwise_affine = false});
  CHECK(plain.parameters().empty());
  et::nn::LayerNorm<float, D> no_bias(D{}, 16, {.bias = false});
  CHECK(no_bias.parameters().size() == 1);
  CHECK_THROWS_WITH(ln(et::rand<float>(D{}, {4, 15}, 7)),
                    Catch::Contains("et: LayerNorm(16): the input has shape [4, 15]; its last axis must be 16"));
  CHECK_THROWS_AS((et::nn::LayerNorm<float, D>(D{}, 0)), et::Error);
  const auto w = et::ones<float>(D{}, {5});
  CHECK_THROWS_WITH(et::layer_norm(x, w, w),
                    Catch::Contains("et: layer_norm of input [4, 16]: weight and bias must have shape [16]"));
  CHECK_THROWS_WITH(et::layer_norm(x, -1.0), Catch::Contains("eps must be finite and not negative"));
  CHECK_THROWS_WITH(et::layer_norm(x, std::nan("")), Catch::Contains("eps must be finite and not negative"));
  CHECK_THROWS_WITH(et::add_layer_norm(x, et::rand<float>(D{}, {4, 8}, 8), ln.weight, ln.bias),
                    Catch::Contains("et: add_layer_norm: the residual must have the input's shape [4, 16]"));
  CHECK_THROWS_AS(et::layer_norm(et::Tensor<float, 2, D>{}), et::Error);
  // GELU: exact by default, tanh on request, anything else refused.
  const auto v = et::rand<float>(D{}, {64}, 9);
  CHECK(et::nn::GELU{}(v).to_vector() == et::eval(et::gelu(v)).to_vector());
  et::nn::GELU tanh_gelu({.approximate = "tanh"});
  CHECK(tanh_gelu.approximates());
  CHECK(tanh_gelu(v).to_vector() == et::eval(et::gelu_tanh(v)).to_vector());
  CHECK_THROWS_WITH(et::nn::GELU({.approximate = "fast"}),
                    Catch::Contains("et: GELU: approximate must be \"none\" or \"tanh\", got \"fast\""));
}

}  // namespace test
