// Randomized differential tests of convolution and pooling (random_cases.hpp has the
// machinery): et::conv2d (with a bias or not) and its data and filter gradients over random
// batches (0 now and then), channels, groups (1, 2, 3 or depthwise), 1..11 x 1..11 images,
// 1..5 x 1..5 kernels (at times past the image, padding making up), strides 1..3, padding
// 0..2 and dilation 1..2; et::max_pool2d, et::avg_pool2d (padding counted or not) and their
// gradients over the same kinds of extents, strides 0..3 (0: the kernel's), padding up to
// half the kernel. nchw or nhwc, every operand contiguous, a permuted view of memory in
// another axis order, or a stepped slice; the four floating types (TF32 off). A draw that
// does not fit (kernel past the padded image, pooling padding past half the kernel) is kept
// now and then and must throw ShapeError. Compared element by element with the double
// loops of conv_reference.hpp on the scale of the reference's largest magnitude, as
// test_conv.cpp does. Shared by the CPU and GPU tests.
#pragma once

#include "conv_reference.hpp"
#include "random_cases.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace test {

/// An operand on D from nchw-ordered `values` (rounded to T here, in place, so that the
/// reference reads what the library reads), in `layout`'s axis order: contiguous, a
/// permuted view of memory in a random axis order, or every other element along a random
/// axis (the skipped ones NaN). `how` names the choice.
template <class T, class D>
et::Tensor<T, 4, D> conv_operand(D dev, std::vector<double>& values, const et::Shape<4>& nchw, et::Layout layout,
                                 std::mt19937_64& rng, std::string& how) {
  for (double& v : values) v = static_cast<double>(static_cast<T>(v));
  const bool nhwc = layout == et::Layout::nhwc;
  const et::Shape<4> shape = nhwc ? nhwc_shape(nchw) : nchw;
  const std::vector<double> ordered = nhwc ? nchw_to_nhwc(values, nchw) : values;
  const int kind = static_cast<int>(rng() % 3), axis = static_cast<int>(rng() % 4);
  std::array<int, 4> order{0, 1, 2, 3};  // kind 1: tensor = base.permute(order)
  std::shuffle(order.begin(), order.end(), rng);
  et::Shape<4> base_shape = shape;
  if (kind == 1) for (int d = 0; d < 4; ++d) base_shape[order[d]] = shape[d];
  if (kind == 2) base_shape[axis] *= 2;
  std::vector<T> base(count_of(base_shape), static_cast<T>(std::nan("")));
  std::array<std::int64_t, 4> i{};
  std::size_t k = 0;
  for (i[0] = 0; i[0] < shape[0]; ++i[0])
    for (i[1] = 0; i[1] < shape[1]; ++i[1])
      for (i[2] = 0; i[2] < shape[2]; ++i[2])
        for (i[3] = 0; i[3] < shape[3]; ++i[3]) {
          auto b = i;
          if (kind == 1) for (int d = 0; d < 4; ++d) b[order[d]] = i[d];
          if (kind == 2) b[axis] *= 2;
          base[at(base_shape, b[0], b[1], b[2], b[3])] = static_cast<T>(ordered[k++]);
        }
  const auto t = et::from_vector(et::cpu, base, base_shape).to(dev);
  how = kind == 0 ? "contiguous" : kind == 1 ? "permuted" : "stepped along axis " + std::to_string(axis);
  return kind == 0 ? t : kind == 1 ? t.permute(order) : t.slice(axis, 0, base_shape[axis], 2);
}

/// Checks a result (in `layout`, nchw shape `nchw`) against the reference: its shape, then
/// every element. False when it failed.
template <class T, class D>
bool conv_matches(const char* what, const et::Tensor<T, 4, D>& got, const et::Shape<4>& nchw, et::Layout layout,
                  const std::vector<double>& want, double tolerance) {
  const bool nhwc = layout == et::Layout::nhwc;
  const et::Shape<4> shape = nhwc ? nhwc_shape(nchw) : nchw;
  if (got.shape() != shape) {
    CAPTURE(what, et::format_shape(got.shape()), et::format_shape(shape));
    CHECK(false);
    return false;
  }
  const auto raw = got.to_vector();
  std::vector<double> values(raw.begin(), raw.end());
  if (nhwc) values = nhwc_to_nchw(values, shape);
  double scale = 1;
  for (const double v : want) scale = std::max(scale, std::fabs(v));
  for (std::size_t e = 0; e < want.size(); ++e) {
    if (!(std::fabs(values[e] - want[e]) <= tolerance * scale)) {
      CAPTURE(what, e, values[e], want[e], tolerance, scale);
      CHECK(false);
      return false;
    }
  }
  return true;
}

/// Whether call() throws et::ShapeError (and nothing else).
template <class F>
bool throws_shape_error(F call) {
  try {
    call();
  } catch (const et::ShapeError&) {
    return true;
  } catch (...) {}
  return false;
}

/// A draw from lo..hi.
inline std::int64_t random_between(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

/// One convolution: forward, backward data and backward filter. False when it failed.
template <class T, class D>
bool run_conv_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  ConvGeometry cc{};
  bool fits = false;
  do {  // a draw that does not fit is kept 1 time in 8 (about 1 case in 20), to see it throw
    const std::int64_t g = random_between(rng, 0, 3);  // groups 1, 2, 3, or depthwise (C of them)
    cc.groups = g == 3 ? random_between(rng, 1, 6) : g + 1;
    cc.c = g == 0 ? random_between(rng, 1, 4) : g == 3 ? cc.groups : cc.groups * random_between(rng, 1, 2);
    cc.k = cc.groups * (g == 0 ? random_between(rng, 1, 4) : random_between(rng, 1, 2));
    cc.n = rng() % 16 == 0 ? 0 : random_between(rng, 1, 3);
    cc.h = random_between(rng, 1, 11), cc.w = random_between(rng, 1, 11);
    cc.r = random_between(rng, 1, 5), cc.s = random_between(rng, 1, 5);
    cc.stride = {random_between(rng, 1, 3), random_between(rng, 1, 3)};
    cc.padding = {random_between(rng, 0, 2), random_between(rng, 0, 2)};
    cc.dilation = {random_between(rng, 1, 2), random_between(rng, 1, 2)};
    cc.bias = rng() % 2 == 0;
    fits = cc.dilation[0] * (cc.r - 1) < cc.h + 2 * cc.padding[0] &&
           cc.dilation[1] * (cc.s - 1) < cc.w + 2 * cc.padding[1];
  } while (!fits && rng() % 8 != 0);
  const et::Layout layout = rng() % 2 == 0 ? et::Layout::nchw : et::Layout::nhwc;
  et::Conv2dOptions options = cc.options(layout);
  options.allow_tf32 = false;
  auto x_data = uniform(cc.input_shape_nchw(), rng()), w_data = uniform(cc.weight_shape_nchw(), rng());
  auto b_data = uniform(std::array<std::int64_t, 1>{cc.k}, rng());
  std::string x_how, w_how, dy_how = "-";
  const auto x = conv_operand<T>(dev, x_data, cc.input_shape_nchw(), layout, rng, x_how);
  const auto w = conv_operand<T>(dev, w_data, cc.weight_shape_nchw(), layout, rng, w_how);
  const bool b_stepped = rng() % 2 == 0;  // the bias: contiguous or every other element
  std::vector<T> b_values(std::size_t(cc.k) * (b_stepped ? 2 : 1), static_cast<T>(std::nan("")));
  for (std::size_t j = 0; j < b_data.size(); ++j) {
    b_values[j * (b_stepped ? 2 : 1)] = static_cast<T>(b_data[j]);
    b_data[j] = static_cast<double>(static_cast<T>(b_data[j]));
  }
  const auto b_base = et::from_vector(et::cpu, b_values, {std::int64_t(b_values.size())}).to(dev);
  const auto b = b_stepped ? b_base.slice(0, 0, 2 * cc.k, 2) : b_base;
  std::vector<double> dy_data;
  et::Tensor<T, 4, D> dy;
  if (fits) {
    dy_data = uniform(cc.output_shape_nchw(), rng());
    dy = conv_operand<T>(dev, dy_data, cc.output_shape_nchw(), layout, rng, dy_how);
  }
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": conv2d on " << type_name(T{}) << ", "
       << (layout == et::Layout::nhwc ? "nhwc" : "nchw") << " (extents in nchw order) " << cc.describe()
       << (cc.bias && b_stepped ? " (stepped)" : "") << (fits ? "" : ", does not fit") << "; x " << x_how << ", w "
       << w_how << ", dy " << dy_how;
  INFO(what.str());
  if (!fits) {
    const auto dy0 = et::zeros<T>(dev, et::Shape<4>{cc.n, 1, 1, 1});
    const bool ok = throws_shape_error([&] { return et::conv2d(x, w, b, options); }) &&
                    throws_shape_error([&] { return et::conv2d_backward_data(dy0, w, x.shape(), options); }) &&
                    throws_shape_error([&] { return et::conv2d_backward_filter(x, dy0, w.shape(), options); });
    CHECK(ok);
    return ok;
  }
  const double tolerance = conv_tolerance<T>();
  return conv_matches("forward", cc.bias ? et::conv2d(x, w, b, options) : et::conv2d(x, w, options),
                      cc.output_shape_nchw(), layout, conv_forward(cc, x_data, w_data, cc.bias ? &b_data : nullptr),
                      tolerance) &&
         conv_matches("backward data", et::conv2d_backward_data(dy, w, x.shape(), options), cc.input_shape_nchw(),
                      layout, conv_backward_data(cc, dy_data, w_data), tolerance) &&
         conv_matches("backward filter", et::conv2d_backward_filter(x, dy, w.shape(), options),
                      cc.weight_shape_nchw(), layout, conv_backward_filter(cc, x_data, dy_data), tolerance);
}

/// Pooling inputs: every [H, W] plane a shuffle of distinct multiples of 1/64 (at most 121
/// of them, so at most 7 significant bits: exact in every type, bfloat16 too), so that
/// every window has a single maximum.
inline std::vector<double> distinct_planes(const et::Shape<4>& nchw, std::mt19937_64& rng) {
  const std::int64_t plane = nchw[2] * nchw[3];
  std::vector<double> out, values(static_cast<std::size_t>(plane));
  for (std::int64_t p = 0; p < nchw[0] * nchw[1]; ++p) {
    for (std::int64_t i = 0; i < plane; ++i) values[std::size_t(i)] = double(i - plane / 2) / 64.0;
    std::shuffle(values.begin(), values.end(), rng);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

/// One pooling: max and average, forward and backward. False when it failed.
template <class T, class D>
bool run_pool_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  PoolGeometry pc{};
  bool fits = false;
  do {  // a draw that does not fit is kept 1 time in 32 (about 1 case in 20), to see it throw
    pc.n = rng() % 16 == 0 ? 0 : random_between(rng, 1, 3);
    pc.c = random_between(rng, 1, 3), pc.h = random_between(rng, 1, 11), pc.w = random_between(rng, 1, 11);
    pc.kernel = {random_between(rng, 1, 5), random_between(rng, 1, 5)};
    pc.stride = {random_between(rng, 0, 3), random_between(rng, 0, 3)};  // 0: the kernel's extent
    pc.padding = {random_between(rng, 0, 2), random_between(rng, 0, 2)};
    pc.count_include_pad = rng() % 2 == 0;
    fits = true;
    for (int d = 0; d < 2; ++d)
      fits = fits && 2 * pc.padding[d] <= pc.kernel[d] && pc.kernel[d] <= (d ? pc.w : pc.h) + 2 * pc.padding[d];
  } while (!fits && rng() % 32 != 0);
  const et::Layout layout = rng() % 2 == 0 ? et::Layout::nchw : et::Layout::nhwc;
  const et::Pool2dOptions options = pc.options(layout);
  auto x_data = distinct_planes(pc.input_shape_nchw(), rng);
  std::string x_how, dy_how = "-";
  const auto x = conv_operand<T>(dev, x_data, pc.input_shape_nchw(), layout, rng, x_how);
  std::vector<double> dy_data;
  et::Tensor<T, 4, D> dy;
  if (fits) {
    dy_data = uniform(pc.output_shape_nchw(), rng());
    dy = conv_operand<T>(dev, dy_data, pc.output_shape_nchw(), layout, rng, dy_how);
  }
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": pool2d on " << type_name(T{}) << ", "
       << (layout == et::Layout::nhwc ? "nhwc" : "nchw") << " (extents in nchw order) " << pc.describe()
       << (fits ? "" : ", does not fit") << "; x " << x_how << ", dy " << dy_how;
  INFO(what.str());
  if (!fits) {
    const auto dy0 = et::zeros<T>(dev, et::Shape<4>{pc.n, 1, 1, 1});
    const bool ok = throws_shape_error([&] { return et::max_pool2d(x, options); }) &&
                    throws_shape_error([&] { return et::avg_pool2d(x, options); }) &&
                    throws_shape_error([&] { return et::max_pool2d_backward(dy0, x, dy0, options); }) &&
                    throws_shape_error([&] { return et::avg_pool2d_backward(dy0, x.shape(), options); });
    CHECK(ok);
    return ok;
  }
  const double tolerance = conv_tolerance<T>();
  const auto y = et::max_pool2d(x, options);
  return conv_matches("max forward", y, pc.output_shape_nchw(), layout, max_pool_forward(pc, x_data), 0.0) &&
         conv_matches("avg forward", et::avg_pool2d(x, options), pc.output_shape_nchw(), layout,
                      avg_pool_forward(pc, x_data), tolerance) &&
         conv_matches("max backward", et::max_pool2d_backward(dy, x, y, options), pc.input_shape_nchw(), layout,
                      max_pool_backward(pc, x_data, dy_data), tolerance) &&
         conv_matches("avg backward", et::avg_pool2d_backward(dy, x.shape(), options), pc.input_shape_nchw(), layout,
                      avg_pool_backward(pc, dy_data), tolerance);
}

/// The convolution family: the four floating types, at most 10^4 cases (on a GPU nearly
/// every case is a new configuration, which costs cuDNN three plan searches).
template <class D>
void run_conv_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 4;
  std::mt19937_64 rng(seed);
  run_family(
      "conv2d", where, seed, rng,
      [&](auto tag, std::int64_t c) { return run_conv_case<decltype(tag)>(dev, rng, seed, c); },
      std::min<std::int64_t>(random_case_count(), 10000));
}

/// The pooling family: the four floating types.
template <class D>
void run_pool_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 5;
  std::mt19937_64 rng(seed);
  run_family("pool2d", where, seed, rng,
             [&](auto tag, std::int64_t c) { return run_pool_case<decltype(tag)>(dev, rng, seed, c); });
}

}  // namespace test
