// Test helpers for convolution and pooling: the cases, seeded data, layout permutations,
// and double-precision reference loops written from the definitions (nchw data, one
// scalar loop per term; nothing shared with the library but the arithmetic).
#pragma once

#include <et/half.hpp>
#include <et/backend/nn_shapes.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "random_values.hpp"

namespace test {

using Pair = std::array<std::int64_t, 2>;

inline std::string pair_text(const Pair& v) { return "{" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "}"; }

/// A convolution's sizes and options in scalars: a row of test_conv.cpp's table or one
/// draw of random_conv_cases.hpp, and what the reference loops below read.
struct ConvGeometry {
  std::int64_t n, c, h, w, k, r, s;
  Pair stride, padding, dilation;
  std::int64_t groups;
  bool bias;

  std::int64_t p() const { return (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) / stride[0] + 1; }
  std::int64_t q() const { return (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) / stride[1] + 1; }
  et::Shape<4> input_shape_nchw() const { return {n, c, h, w}; }
  et::Shape<4> weight_shape_nchw() const { return {k, c / groups, r, s}; }
  et::Shape<4> output_shape_nchw() const { return {n, k, p(), q()}; }
  et::Conv2dOptions options(et::Layout layout) const {
    return {.stride = stride, .padding = padding, .dilation = dilation, .groups = groups, .layout = layout};
  }
  std::string describe() const {
    return "x [" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) + "," + std::to_string(w) +
           "] w [" + std::to_string(k) + "," + std::to_string(c / groups) + "," + std::to_string(r) + "," +
           std::to_string(s) + "] stride " + pair_text(stride) + " padding " + pair_text(padding) + " dilation " +
           pair_text(dilation) + " groups " + std::to_string(groups) + (bias ? " +bias" : "");
  }
};

/// A pooling's sizes and options in scalars (stride 0: the kernel's extent).
struct PoolGeometry {
  std::int64_t n, c, h, w;
  Pair kernel, stride, padding;
  bool count_include_pad;

  Pair effective_stride() const {
    return {stride[0] ? stride[0] : kernel[0], stride[1] ? stride[1] : kernel[1]};
  }
  std::int64_t p() const { return (h + 2 * padding[0] - kernel[0]) / effective_stride()[0] + 1; }
  std::int64_t q() const { return (w + 2 * padding[1] - kernel[1]) / effective_stride()[1] + 1; }
  et::Shape<4> input_shape_nchw() const { return {n, c, h, w}; }
  et::Shape<4> output_shape_nchw() const { return {n, c, p(), q()}; }
  et::Pool2dOptions options(et::Layout layout) const {
    return {.kernel = kernel, .stride = stride, .padding = padding, .count_include_pad = count_include_pad,
            .layout = layout};
  }
  std::string describe() const {
    return "x [" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) + "," + std::to_string(w) +
           "] kernel " + pair_text(kernel) + " stride " + pair_text(stride) + " padding " + pair_text(padding) +
           (count_include_pad ? " include pad" : " exclude pad");
  }
};

/// The tolerance of a convolution or pooling result in T, relative to the reference's
/// largest magnitude (at least 1): sums of many rounded products err in proportion to it.
template <class T>
constexpr double conv_tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, et::half>) return 2e-3;
  else return 1.6e-2;  // bfloat16
}

template <std::size_t R>
std::size_t count_of(const std::array<std::int64_t, R>& shape) {
  std::size_t count = 1;
  for (auto extent : shape) count *= static_cast<std::size_t>(extent);
  return count;
}

/// Seeded values in [-1, 1), one per element of `shape`.
template <std::size_t R>
std::vector<double> uniform(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  return random_values<double>(count_of(shape), seed, -1.0, 1.0);
}

/// Seeded, pairwise distinct values: a shuffle of (i - count/2) / count.
template <std::size_t R>
std::vector<double> distinct(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  const std::size_t count = count_of(shape);
  std::vector<std::int64_t> order(count);
  std::iota(order.begin(), order.end(), -std::int64_t(count / 2));
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = double(order[i]) / double(count);
  return out;
}

/// [a, b, c, d] -> [a, c, d, b]: an nchw shape (or a weight's [K, C, R, S]) in nhwc order.
inline et::Shape<4> nhwc_shape(const et::Shape<4>& nchw) { return {nchw[0], nchw[2], nchw[3], nchw[1]}; }

/// Row-major data of shape [a, b, c, d] reordered as [a, c, d, b].
inline std::vector<double> nchw_to_nhwc(const std::vector<double>& v, const et::Shape<4>& nchw) {
  const auto [a, b, c, d] = nchw;
  std::vector<double> out(v.size());
  for (std::int64_t i = 0; i < a; ++i)
    for (std::int64_t j = 0; j < b; ++j)
      for (std::int64_t k = 0; k < c; ++k)
        for (std::int64_t l = 0; l < d; ++l)
          out[std::size_t(((i * c + k) * d + l) * b + j)] = v[std::size_t(((i * b + j) * c + k) * d + l)];
  return out;
}

/// Row-major data of shape [a, c, d, b] (nhwc) reordered as [a, b, c, d].
inline std::vector<double> nhwc_to_nchw(const std::vector<double>& v, const et::Shape<4>& nhwc) {
  const auto [a, c, d, b] = nhwc;
  std::vector<double> out(v.size());
  for (std::int64_t i = 0; i < a; ++i)
    for (std::int64_t j = 0; j < b; ++j)
      for (std::int64_t k = 0; k < c; ++k)
        for (std::int64_t l = 0; l < d; ++l)
          out[std::size_t(((i * b + j) * c + k) * d + l)] = v[std::size_t(((i * c + k) * d + l) * b + j)];
  return out;
}

/// Calls f(n, k, p, q, ci, c, r, s, h, w) for every term of the convolution whose input
/// element (n, ci, h, w) lies inside the image: ci is the input channel, c its index in
/// output channel k's group (the weight's channel axis).
template <class F>
void for_each_term(const ConvGeometry& cc, F f) {
  const std::int64_t cg = cc.c / cc.groups, kg = cc.k / cc.groups;
  for (std::int64_t n = 0; n < cc.n; ++n)
    for (std::int64_t k = 0; k < cc.k; ++k)
      for (std::int64_t p = 0; p < cc.p(); ++p)
        for (std::int64_t q = 0; q < cc.q(); ++q)
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t r = 0; r < cc.r; ++r)
              for (std::int64_t s = 0; s < cc.s; ++s) {
                const std::int64_t h = p * cc.stride[0] - cc.padding[0] + r * cc.dilation[0];
                const std::int64_t w = q * cc.stride[1] - cc.padding[1] + s * cc.dilation[1];
                if (h < 0 || h >= cc.h || w < 0 || w >= cc.w) continue;
                f(n, k, p, q, (k / kg) * cg + c, c, r, s, h, w);
              }
}

inline std::size_t at(const et::Shape<4>& shape, std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t l) {
  return std::size_t(((i * shape[1] + j) * shape[2] + k) * shape[3] + l);
}

inline std::vector<double> conv_forward(const ConvGeometry& cc, const std::vector<double>& x,
                                        const std::vector<double>& w, const std::vector<double>* bias) {
  const auto xs = cc.input_shape_nchw(), ws = cc.weight_shape_nchw(), ys = cc.output_shape_nchw();
  std::vector<double> y(count_of(ys), 0.0);
  if (bias)
    for (std::int64_t n = 0; n < cc.n; ++n)
      for (std::int64_t k = 0; k < cc.k; ++k)
        for (std::int64_t p = 0; p < cc.p(); ++p)
          for (std::int64_t q = 0; q < cc.q(); ++q) y[at(ys, n, k, p, q)] = (*bias)[std::size_t(k)];
  for_each_term(cc, [&](auto n, auto k, auto p, auto q, auto ci, auto c, auto r, auto s, auto h, auto wi) {
    y[at(ys, n, k, p, q)] += x[at(xs, n, ci, h, wi)] * w[at(ws, k, c, r, s)];
  });
  return y;
}

inline std::vector<double> conv_backward_data(const ConvGeometry& cc, const std::vector<double>& dy,
                                              const std::vector<double>& w) {
  const auto xs = cc.input_shape_nchw(), ws = cc.weight_shape_nchw(), ys = cc.output_shape_nchw();
  std::vector<double> dx(count_of(xs), 0.0);
  for_each_term(cc, [&](auto n, auto k, auto p, auto q, auto ci, auto c, auto r, auto s, auto h, auto wi) {
    dx[at(xs, n, ci, h, wi)] += dy[at(ys, n, k, p, q)] * w[at(ws, k, c, r, s)];
  });
  return dx;
}

inline std::vector<double> conv_backward_filter(const ConvGeometry& cc, const std::vector<double>& x,
                                                const std::vector<double>& dy) {
  const auto xs = cc.input_shape_nchw(), ws = cc.weight_shape_nchw(), ys = cc.output_shape_nchw();
  std::vector<double> dw(count_of(ws), 0.0);
  for_each_term(cc, [&](auto n, auto k, auto p, auto q, auto ci, auto c, auto r, auto s, auto h, auto wi) {
    dw[at(ws, k, c, r, s)] += x[at(xs, n, ci, h, wi)] * dy[at(ys, n, k, p, q)];
  });
  return dw;
}

/// Calls f(n, c, p, q, elements) for every pooling window, `elements` listing the input
/// offsets of its in-image part in row-major order.
template <class F>
void for_each_window(const PoolGeometry& pc, F f) {
  const auto xs = pc.input_shape_nchw();
  const Pair st = pc.effective_stride();
  for (std::int64_t n = 0; n < pc.n; ++n)
    for (std::int64_t c = 0; c < pc.c; ++c)
      for (std::int64_t p = 0; p < pc.p(); ++p)
        for (std::int64_t q = 0; q < pc.q(); ++q) {
          std::vector<std::size_t> elements;
          for (std::int64_t i = 0; i < pc.kernel[0]; ++i)
            for (std::int64_t j = 0; j < pc.kernel[1]; ++j) {
              const std::int64_t h = p * st[0] - pc.padding[0] + i, w = q * st[1] - pc.padding[1] + j;
              if (h >= 0 && h < pc.h && w >= 0 && w < pc.w) elements.push_back(at(xs, n, c, h, w));
            }
          f(n, c, p, q, elements);
        }
}

/// The window's maximum: the first in row-major order, or its first NaN.
inline std::size_t argmax(const std::vector<double>& x, const std::vector<std::size_t>& elements) {
  std::size_t best = elements.front();
  for (std::size_t e : elements) {
    if (std::isnan(x[best])) break;
    if (std::isnan(x[e]) || x[e] > x[best]) best = e;
  }
  return best;
}

inline double divisor(const PoolGeometry& pc, const std::vector<std::size_t>& elements) {
  return pc.count_include_pad ? double(pc.kernel[0] * pc.kernel[1]) : double(elements.size());
}

inline std::vector<double> max_pool_forward(const PoolGeometry& pc, const std::vector<double>& x) {
  const auto ys = pc.output_shape_nchw();
  std::vector<double> y(count_of(ys));
  for_each_window(pc, [&](auto n, auto c, auto p, auto q, const auto& elements) {
    y[at(ys, n, c, p, q)] = x[argmax(x, elements)];
  });
  return y;
}

inline std::vector<double> avg_pool_forward(const PoolGeometry& pc, const std::vector<double>& x) {
  const auto ys = pc.output_shape_nchw();
  std::vector<double> y(count_of(ys));
  for_each_window(pc, [&](auto n, auto c, auto p, auto q, const auto& elements) {
    double sum = 0;
    for (std::size_t e : elements) sum += x[e];
    y[at(ys, n, c, p, q)] = sum / divisor(pc, elements);
  });
  return y;
}

inline std::vector<double> max_pool_backward(const PoolGeometry& pc, const std::vector<double>& x,
                                             const std::vector<double>& dy) {
  const auto ys = pc.output_shape_nchw();
  std::vector<double> dx(x.size(), 0.0);
  for_each_window(pc, [&](auto n, auto c, auto p, auto q, const auto& elements) {
    dx[argmax(x, elements)] += dy[at(ys, n, c, p, q)];
  });
  return dx;
}

inline std::vector<double> avg_pool_backward(const PoolGeometry& pc, const std::vector<double>& dy) {
  const auto ys = pc.output_shape_nchw();
  std::vector<double> dx(count_of(pc.input_shape_nchw()), 0.0);
  for_each_window(pc, [&](auto n, auto c, auto p, auto q, const auto& elements) {
    for (std::size_t e : elements) dx[e] += dy[at(ys, n, c, p, q)] / divisor(pc, elements);
  });
  return dx;
}

}  // namespace test
