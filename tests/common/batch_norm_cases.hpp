// Batch normalization (ops/batch_norm.hpp, nn::BatchNorm2d), shared by the CPU and GPU tests
// (test_modules.cpp / .cu): the module against a double-precision host reference, and every
// form of the operation (alone, with ReLU, with a residual on all or some channels; training
// and eval; every floating type; shapes that take each of the CUDA kernels' paths: several
// blocks a channel, planes cut into parts, planes read 16 bytes at a time or not, teams of
// one lane) forward and backward against a host reference of its formulas in double; and
// the mixed-precision forms (x and the residual half or bfloat16, the per-channel tensors
// float), through the operation and through nn::BatchNorm2d<float, D>, against the same
// reference on the 16-bit inputs, with a tolerance for y's, dx's and the residual
// gradient's final rounding to the 16-bit type. The random op-gradient family
// (random_op_grad_nn.hpp) checks the same forms' gradients against central differences.
#pragma once

#include "gradcheck.hpp"

#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace test {

/// One form of batch normalization on [n, c, h, w]: a residual of `residual` channels from
/// channel `offset` (-1: none), read through a strided view (every other element of a
/// plane twice as large) when `strided`; x transposed in its last two axes when `transposed`.
struct BatchNormForm {
  std::int64_t n, c, h, w;
  bool training = true, relu = false;
  std::int64_t residual = -1, offset = 0;
  bool strided = false, transposed = false;
};

/// The formulas of ops/batch_norm.hpp in double: y, the running statistics after the call,
/// and the gradients from gy (ReLU's mask from y_mask > 0: the device's own output, so that a
/// pre-activation within rounding of 0 cannot flip between the two).
struct BatchNormReference {
  std::vector<double> y, running_mean, running_var, dx, dw, db, dresidual;
};
inline BatchNormReference batch_norm_reference(const BatchNormForm& f, const std::vector<double>& x,
                                               const std::vector<double>& w, const std::vector<double>& b,
                                               const std::vector<double>& r, std::vector<double> rm,
                                               std::vector<double> rv, const std::vector<double>& gy,
                                               const std::vector<double>& y_mask) {
  const std::int64_t hw = f.h * f.w, m = f.n * hw, rc = f.residual < 0 ? 0 : f.residual;
  BatchNormReference out;
  out.y.resize(x.size());
  out.dx.resize(x.size());
  out.dresidual.resize(r.size());
  auto at = [&](std::int64_t i, std::int64_t k, std::int64_t p) { return static_cast<std::size_t>((i * f.c + k) * hw + p); };
  auto r_at = [&](std::int64_t i, std::int64_t k, std::int64_t p) {
    return static_cast<std::size_t>((i * rc + k - f.offset) * hw + p);
  };
  for (std::int64_t k = 0; k < f.c; ++k) {
    const auto ks = static_cast<std::size_t>(k);
    double mean = 0, var = 0;
    if (f.training) {
      for (std::int64_t i = 0; i < f.n; ++i)
        for (std::int64_t p = 0; p < hw; ++p) mean += x[at(i, k, p)] / double(m);
      for (std::int64_t i = 0; i < f.n; ++i)
        for (std::int64_t p = 0; p < hw; ++p) var += std::pow(x[at(i, k, p)] - mean, 2) / double(m);
      rm[ks] = 0.9 * rm[ks] + 0.1 * mean;
      rv[ks] = 0.9 * rv[ks] + 0.1 * var * double(m) / double(m - 1);
    } else {
      mean = rm[ks];
      var = rv[ks];
    }
    const double invstd = 1 / std::sqrt(var + 1e-5);
    const bool added = k >= f.offset && k < f.offset + rc;
    double sum_g = 0, sum_g_xhat = 0;
    for (std::int64_t i = 0; i < f.n; ++i)
      for (std::int64_t p = 0; p < hw; ++p) {
        double v = (x[at(i, k, p)] - mean) * invstd * w[ks] + b[ks] + (added ? r[r_at(i, k, p)] : 0.0);
        out.y[at(i, k, p)] = f.relu ? std::max(v, 0.0) : v;
        const double g = f.relu && !(y_mask[at(i, k, p)] > 0) ? 0.0 : gy[at(i, k, p)];
        if (added) out.dresidual[r_at(i, k, p)] = g;
        sum_g += g;
        sum_g_xhat += g * (x[at(i, k, p)] - mean) * invstd;
      }
    out.db.push_back(sum_g);
    out.dw.push_back(sum_g_xhat);
    for (std::int64_t i = 0; i < f.n; ++i)
      for (std::int64_t p = 0; p < hw; ++p) {
        const double g = f.relu && !(y_mask[at(i, k, p)] > 0) ? 0.0 : gy[at(i, k, p)];
        const double xhat = (x[at(i, k, p)] - mean) * invstd;
        out.dx[at(i, k, p)] = f.training ? w[ks] * invstd / double(m) * (double(m) * g - sum_g - xhat * sum_g_xhat)
                                         : w[ks] * invstd * g;
      }
  }
  out.running_mean = std::move(rm);
  out.running_var = std::move(rv);
  return out;
}

/// The values of a device tensor of any floating type, as doubles.
template <class T, int R, class D>
std::vector<double> doubles_of(const et::Tensor<T, R, D>& t) {
  return et::eval(et::cast<double>(t)).to_vector();
}

/// A leaf of type T on D from seeded values in [lo, hi) (as T rounds them).
template <class T, int R, class D>
et::Tensor<T, R, D> batch_norm_leaf(const et::Shape<R>& shape, std::uint64_t seed, double lo, double hi,
                                    bool requires_grad) {
  std::size_t count = 1;
  for (const auto e : shape) count *= static_cast<std::size_t>(e);
  et::Tensor<T, R, D> t = et::cast<T>(et::from_vector(D{}, random_values<double>(count, seed, lo, hi), shape));
  if (requires_grad) t.requires_grad_(true);
  return t;
}

/// Form f of batch_norm / batch_norm_add on device D, x and the residual of type T and the
/// per-channel tensors of P (T, or float: mixed precision), forward and backward, against
/// batch_norm_reference within `tolerance` for what is of type T (y, dx, the residual's
/// gradient) and `p_tolerance` (default: `tolerance`) for what is of P (the running
/// statistics, dweight, dbias), each scaled by the result's largest value. With
/// `through_module`, through nn::BatchNorm2d<P, D> holding those tensors (forward, forward_relu or
/// forward_add_relu; a form with a residual and no ReLU, which the module has no call for,
/// through the operation), and then its num_batches_tracked is checked too.
template <class T, class D, class P = T>
void check_batch_norm_form(const BatchNormForm& f, double tolerance, double p_tolerance = -1,
                           bool through_module = false) {
  if (p_tolerance < 0) p_tolerance = tolerance;
  const bool by_module = through_module && (f.residual < 0 || f.relu);
  CAPTURE(f.n, f.c, f.h, f.w, f.training, f.relu, f.residual, f.offset, f.strided, f.transposed, sizeof(T), sizeof(P),
          by_module);
  const std::uint64_t seed = static_cast<std::uint64_t>(f.n * 131 + f.c * 17 + f.h * 7 + f.w + f.relu);
  // x itself, or a transposed view of a leaf [n, c, w, h]
  const auto x_leaf = f.transposed ? batch_norm_leaf<T, 4, D>({f.n, f.c, f.w, f.h}, seed, -1, 3, true)
                                   : batch_norm_leaf<T, 4, D>({f.n, f.c, f.h, f.w}, seed, -1, 3, true);
  auto as_x = [&](const et::Tensor<T, 4, D>& t) { return f.transposed ? t.transpose(2, 3) : t; };
  const et::Tensor<T, 4, D> x = as_x(x_leaf);
  const std::vector<double> xs = doubles_of(x);
  const auto w = batch_norm_leaf<P, 1, D>({f.c}, seed + 1, 0.5, 2, true);
  const std::vector<double> ws = doubles_of(w);
  const auto b = batch_norm_leaf<P, 1, D>({f.c}, seed + 2, -1, 1, true);
  const std::vector<double> bs = doubles_of(b);
  const auto rm = batch_norm_leaf<P, 1, D>({f.c}, seed + 3, -1, 1, false);
  const std::vector<double> rms = doubles_of(rm);
  const auto rv = batch_norm_leaf<P, 1, D>({f.c}, seed + 4, 0.5, 2, false);
  const std::vector<double> rvs = doubles_of(rv);
  const std::int64_t rc = std::max<std::int64_t>(f.residual, 0);
  const std::int64_t scale = f.strided ? 2 : 1;
  const auto r_leaf = batch_norm_leaf<T, 4, D>({f.n, rc, f.h * scale, f.w * scale}, seed + 5, -2, 2, true);
  // the residual itself, or every other value of each plane of a leaf twice as large
  auto as_r = [&](const et::Tensor<T, 4, D>& t) {
    return f.strided ? t.slice(2, 0, f.h * 2, 2).slice(3, 0, f.w * 2, 2) : t;
  };
  const et::Tensor<T, 4, D> r = as_r(r_leaf);
  const std::vector<double> rs = doubles_of(r);
  const auto gy = batch_norm_leaf<T, 4, D>({f.n, f.c, f.h, f.w}, seed + 6, -1, 1, false);
  const std::vector<double> gys = doubles_of(gy);
  const et::BatchNormOptions options{.training = f.training, .relu = f.relu};
  et::nn::BatchNorm2d<P, D> bn(D{}, f.c);
  bn.weight = w;
  bn.bias = b;
  bn.running_mean = rm;
  bn.running_var = rv;
  if (!f.training) bn.eval();
  auto run = [&] {
    if (!by_module)
      return f.residual < 0 ? et::batch_norm(x, rm, rv, w, b, options)
                            : et::batch_norm_add(x, r, rm, rv, w, b, options, f.offset);
    if (f.residual >= 0) return bn.forward_add_relu(x, r, f.offset);
    return f.relu ? bn.forward_relu(x) : bn(x);
  };
  const auto y = run();
  static_assert(std::is_same_v<decltype(y), const et::Tensor<T, 4, D>>, "y has x's type");
  y.backward(gy);
  const std::vector<double> ys = doubles_of(y);
  const auto want = batch_norm_reference(f, xs, ws, bs, rs, rms, rvs, gys, ys);
  check_scaled_close(ys, want.y, tolerance, "batch_norm: y");
  check_scaled_close(doubles_of(rm), want.running_mean, p_tolerance, "batch_norm: running_mean");
  check_scaled_close(doubles_of(rv), want.running_var, p_tolerance, "batch_norm: running_var");
  if (by_module) CHECK(bn.num_batches_tracked.item() == (f.training ? 1 : 0));
  const et::Tensor<T, 4, D> dx = x_leaf.grad();
  const et::Tensor<P, 1, D> dw = w.grad(), db = b.grad();
  check_scaled_close(doubles_of(as_x(dx)), want.dx, tolerance, "batch_norm: dx");
  check_scaled_close(doubles_of(dw), want.dw, p_tolerance, "batch_norm: dweight");
  check_scaled_close(doubles_of(db), want.db, p_tolerance, "batch_norm: dbias");
  if (f.residual > 0) check_scaled_close(doubles_of(as_r(r_leaf.grad())), want.dresidual, tolerance, "batch_norm: the residual's gradient");
}

/// Every form, in every floating type; `large` adds the shapes that need a GPU's time.
template <class D>
void check_batch_norm_forms(bool large) {
  const std::vector<BatchNormForm> small{
      {3, 5, 3, 3},
      {4, 3, 5, 2, true, true, 3, 0, false, true},    // relu(bn(x^T) + r)
      {4, 6, 4, 4, true, true, 3, 2, true, false},    // option A: 3 of 6 channels, a strided residual
      {2, 4, 4, 8, false, true},                      // eval, relu
      {3, 4, 2, 3, false, false, 2, 1},               // eval, residual on channels 1 and 2
      {40, 3, 1, 1, true, true},                      // planes of one value
      {5, 2, 7, 7, true, true, 2, 0},                 // 49-value planes
      {0, 3, 2, 2, false, true, 3, 0},                // eval over no values: dweight = dbias = 0
  };
  for (const BatchNormForm& f : small) {
    check_batch_norm_form<double, D>(f, 1e-10);
    check_batch_norm_form<float, D>(f, 2e-5);
  }
  check_batch_norm_form<et::bfloat16, D>({4, 6, 4, 4, true, true, 3, 2, true, false}, 3e-2);
  check_batch_norm_form<et::half, D>({4, 6, 4, 4, true, true, 6, 0}, 5e-3);
  // Mixed precision: x and the residual 16-bit, the per-channel tensors float; through the
  // operation and the module. y, dx and the residual's gradient are rounded once to the
  // 16-bit type (half an ulp: at most 2^-8 of the value in bfloat16, 2^-11 in half), the
  // rest float.
  const std::vector<BatchNormForm> mixed{
      {3, 5, 3, 3},                                   // training
      {1, 3, 5, 7, true, true},                       // N = 1, odd planes, relu
      {4, 6, 3, 5, true, true, 3, 2, true, false},    // option A: a strided shortcut on channels 2..4
      {4, 3, 5, 2, true, true, 3, 0, false, true},    // relu(bn(x^T) + r)
      {40, 3, 1, 1, true, true},                      // planes of one value
      {5, 2, 7, 7, true, true, 2, 0},                 // 49-value planes
      {2, 4, 4, 8, false, true},                      // eval, relu
      {3, 4, 2, 3, false, false, 2, 1},               // eval, residual on channels 1 and 2 (operation only)
      {2, 5, 3, 1, false, true, 2, 3},                // eval, relu, shortcut on channels 3 and 4
      {0, 3, 2, 2, false, true, 3, 0},                // eval over no values: dweight = dbias = 0
  };
  for (const BatchNormForm& f : mixed)
    for (const bool by_module : {false, true}) {
      check_batch_norm_form<et::bfloat16, D, float>(f, 5e-3, 2e-5, by_module);
      check_batch_norm_form<et::half, D, float>(f, 1e-3, 2e-5, by_module);
    }
  if (!large) return;
  const std::vector<BatchNormForm> big{
      {64, 16, 32, 32, true, true, 16, 0},          // ResNet-56 at batch 64: several blocks a channel
      {16, 64, 56, 56, true, true, 32, 16, true},   // ResNet-50's first stage, option A: planes in parts
      {16, 96, 7, 7, true, true},                   // 49-value planes, one access a value
      {300, 3, 1, 1, true, false},                  // teams of one lane
      {16, 64, 56, 56, false, true, 64, 0},         // eval
  };
  for (const BatchNormForm& f : big) {
    check_batch_norm_form<float, D>(f, 1e-4);
    check_batch_norm_form<double, D>(f, 1e-10);
  }
  check_batch_norm_form<et::bfloat16, D>({16, 64, 56, 56, true, true, 64, 0}, 3e-2);
  check_batch_norm_form<et::bfloat16, D, float>({16, 64, 56, 56, true, true, 32, 16, true}, 5e-3, 1e-4, true);
  check_batch_norm_form<et::half, D, float>({64, 16, 32, 32, true, true, 16, 0}, 1e-3, 1e-4);
  check_batch_norm_form<et::half, D, float>({16, 96, 7, 7, false, true}, 1e-3, 1e-4, true);
  check_batch_norm_form<et::bfloat16, D, float>({300, 3, 1, 1, true, false}, 5e-3, 1e-4);
}

template <class D>
void check_batch_norm() {
  const std::int64_t n = 4, c = 3, h = 5, w = 2, per = n * h * w;
  const auto xs = random_values<double>(static_cast<std::size_t>(n * c * h * w), 8, -1, 3);
  const auto x = et::from_vector(D{}, xs, {n, c, h, w});
  et::nn::BatchNorm2d<double, D> bn(D{}, c);
  const auto y = bn(x).to_vector();
  std::vector<double> expected(xs.size()), mean(c, 0), var(c, 0);
  auto at = [&](std::int64_t i, std::int64_t k, std::int64_t r) { return (i * c + k) * h * w + r; };
  for (std::int64_t k = 0; k < c; ++k) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < h * w; ++r) mean[k] += xs[at(i, k, r)] / per;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < h * w; ++r) var[k] += std::pow(xs[at(i, k, r)] - mean[k], 2) / per;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < h * w; ++r) expected[at(i, k, r)] = (xs[at(i, k, r)] - mean[k]) / std::sqrt(var[k] + 1e-5);
  }
  check_all_close(y, expected, 1e-12);
  std::vector<double> running_mean(c), running_var(c);
  for (std::int64_t k = 0; k < c; ++k) {
    running_mean[k] = 0.1 * mean[k];
    running_var[k] = 0.9 + 0.1 * var[k] * per / (per - 1);
  }
  check_all_close(bn.running_mean.to_vector(), running_mean, 1e-12);
  check_all_close(bn.running_var.to_vector(), running_var, 1e-12);
  CHECK(bn.num_batches_tracked.item() == 1);
  // The fused forms count the batch too, and read what bn(x) reads.
  std::vector<double> relu_expected(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) relu_expected[i] = std::max(expected[i], 0.0);
  et::nn::BatchNorm2d<double, D> fused(D{}, c);
  check_all_close(fused.forward_relu(x).to_vector(), relu_expected, 1e-12);
  check_all_close(fused.forward_add_relu(x, et::zeros<double>(D{}, {n, 1, h, w}), 2).to_vector(), relu_expected, 1e-12);
  CHECK(fused.num_batches_tracked.item() == 2);
  bn.eval();
  const auto z = bn(x).to_vector();
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t r = 0; r < h * w; ++r)
        expected[at(i, k, r)] = (xs[at(i, k, r)] - running_mean[k]) / std::sqrt(running_var[k] + 1e-5);
  check_all_close(z, expected, 1e-12);
  bn.forward_relu(x);
  CHECK(bn.num_batches_tracked.item() == 1);
  CHECK_THROWS_AS(bn(et::zeros<double>(D{}, {2, 4, 3, 3})), et::ShapeError);
  bn.train();
  CHECK_THROWS_AS(bn(et::zeros<double>(D{}, {1, 3, 1, 1})), et::ShapeError);
  CHECK(bn.parameters().size() == 2);  // the running statistics are buffers
  gradcheck<D>(
      "BatchNorm2d",
      [](const auto& x, const auto& weight, const auto& bias) {
        et::nn::BatchNorm2d<double, D> bn(D{}, 2);
        bn.weight = weight;
        bn.bias = bias;
        return bn(x);
      },
      grad_input<4>({3, 2, 2, 3}, 5), grad_input<1>({2}, 6), grad_input<1>({2}, 7));

  const auto ones = et::ones<double>(D{}, {c}), zeros = et::zeros<double>(D{}, {c});
  const auto dm = et::zeros<double>(D{}, {c}), dv = et::ones<double>(D{}, {c});
  CHECK_THROWS_WITH(et::batch_norm(x, dm, dv, ones, et::zeros<double>(D{}, {c + 1})),
                    Catch::Contains("batch_norm of input [4, 3, 5, 2]: running_mean, running_var, weight and bias must have shape [3]"));
  CHECK_THROWS_WITH(et::batch_norm(x, dm, dv, ones, zeros, {.eps = 0}), Catch::Contains("eps must be positive"));
  CHECK_THROWS_WITH(et::batch_norm(x, dm, et::zeros<double>(D{}, {2 * c}).slice(0, 0, 2 * c, 2), ones, zeros),
                    Catch::Contains("must be contiguous"));
  const std::string bad_residual = "the residual must be [N, C', H, W] as the input";
  CHECK_THROWS_WITH(et::batch_norm_add(x, et::zeros<double>(D{}, {n, 2, h, w}), dm, dv, ones, zeros, {}, 2),
                    Catch::Contains("batch_norm_add of input [4, 3, 5, 2] and residual [4, 2, 5, 2] at channel 2") &&
                        Catch::Contains(bad_residual));
  CHECK_THROWS_WITH(et::batch_norm_add(x, et::zeros<double>(D{}, {n, 1, h, w}), dm, dv, ones, zeros, {}, -1),
                    Catch::Contains(bad_residual));
  CHECK_THROWS_WITH(et::batch_norm_add(x, et::zeros<double>(D{}, {n, 3, h, 1}), dm, dv, ones, zeros),
                    Catch::Contains(bad_residual));
  CHECK_THROWS_WITH(et::batch_norm_add(x, et::zeros<double>(D{}, {n + 1, 3, h, w}), dm, dv, ones, zeros),
                    Catch::Contains(bad_residual));
}

}  // namespace test
