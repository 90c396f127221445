// Convolution on the CPU through oneDNN (ET_DNNL_PRIMITIVES: ET_WITH_DNNL outside nvcc; engine, errors and arguments:
// dnnl.hpp), on packed float buffers in the geometry's layout, as backend/cpu/nn.hpp calls
// it for float, half and bfloat16 (double, and what oneDNN declines, run conv.hpp).
//
// Formats, as measured on CIFAR-net shapes (N=128; 3x3 C=K=16/32/64 at 32, 16, 8 pixels;
// 5x5 C=3->64 at 32) on one AVX-512 thread, reorders included:
//  - The weight always goes in the primitive's own format (format_tag::any; a reorder of a
//    few KiB). Given a plain ohwi weight, nhwc convolutions get only oneDNN's reference loops.
//  - nhwc activations stay in our buffers: oneDNN's brgemm forward and JIT backward passes
//    read and write nhwc directly, 1.03x (C=K=64 at 8 pixels) to 3x (5x5) faster than
//    reordering them to the blocked nChw16c and back.
//  - nchw activations are reordered into the primitive's format (nChw16c) and back. The
//    reorders cost about 40% of a pass, but buy oneDNN's JIT kernels, 2-5x faster than the
//    GEMM path it takes on plain nchw (C=K=16 at 32 pixels: 7/6/6 ms for forward, backward
//    data and backward filter against 17/28/30). Below 8 input channels blocking the input
//    pads it to 16 and loses (C=3->64 5x5: 29/61/25 ms against 18/22/28): the input stays
//    plain nchw and only the output is blocked, which oneDNN's first-layer kernels take
//    (AlexNet-R's step 0.92 -> 0.70 s against all-plain, which got its GEMM-based kernel).
//  - Preferred formats that get only the reference loops are retried plain; when those do
//    too, or oneDNN has no implementation, the call is declined.
// Against conv.hpp's im2col + Eigen, a forward pass plus both gradients of these shapes
// runs 2.7x (5x5 C=3) to 7.7x faster on one thread, 2.6x to 6.7x on two.
// The algorithm is direct convolution (no Winograd, whose transforms round differently).
// oneDNN takes the padding on each side; the right one is derived from the output extent,
// (P - 1) * stride + span - H - left, which can be negative (the last window ends inside
// the image) and always exceeds -stride, as oneDNN requires.
#pragma once

#include "et/backend/cpu/dnnl.hpp"  // ET_DNNL_PRIMITIVES

#if defined(ET_DNNL_PRIMITIVES)

#include <algorithm>
#include <cstdint>
#include <optional>

#include "et/backend/nn_shapes.hpp"

namespace et::detail::cpu_backend::dnnl {

/// nchw activations with at least this many input channels go to the primitive's blocked
/// format (see the header).
inline constexpr std::int64_t blocked_min_channels = 8;

/// A convolution as oneDNN takes it: our buffers' descriptors, and the strides, dilation
/// (oneDNN counts the taps skipped between two it reads: dilation - 1) and padding per side.
struct ConvProblem {
  memory::desc x, w, y, bias;
  memory::dims stride, dilation, padding_l, padding_r;
};

/// Below this many multiply-adds a convolution stays with conv.hpp: oneDNN's call costs
/// about 8 us more a pass, and each new configuration is compiled once (the random test
/// families, nearly every case a new one, took 21 s instead of 2.3 s with them all in oneDNN).
inline constexpr double smallest_dnnl_convolution = 32768;

/// The problem of g, or nullopt when it is small or an extent is past oneDNN's int.
inline std::optional<ConvProblem> conv_problem(const ConvGeometry& g) {
  if (double(g.n) * double(g.k) * double(g.c_per_group()) * double(g.r) * double(g.s) * double(g.p) * double(g.q) <
      smallest_dnnl_convolution)
    return std::nullopt;
  const std::int64_t span_h = g.dilation[0] * (g.r - 1) + 1, span_w = g.dilation[1] * (g.s - 1) + 1;
  const std::int64_t cg = g.c_per_group(), kg = g.k_per_group();
  if (!fits_int32({g.n * g.c * g.h * g.w, g.n * g.k * g.p * g.q, g.k * cg * g.r * g.s, g.h + 2 * g.padding[0],
                   g.w + 2 * g.padding[1], span_h, span_w, g.stride[0], g.stride[1]}))
    return std::nullopt;
  ConvProblem c;
  c.x = activation_desc(g.layout, g.n, g.c, g.h, g.w);
  c.y = activation_desc(g.layout, g.n, g.k, g.p, g.q);
  // Our weight [K, C/g, R, S] (nhwc: [K, R, S, C/g]) is oneDNN's grouped [g, K/g, C/g, R, S]
  // stored goihw (nhwc: gohwi).
  if (g.groups == 1)
    c.w = memory::desc({g.k, cg, g.r, g.s}, memory::data_type::f32, g.nhwc() ? tag::ohwi : tag::oihw);
  else
    c.w = memory::desc({g.groups, kg, cg, g.r, g.s}, memory::data_type::f32, g.nhwc() ? tag::gohwi : tag::goihw);
  c.bias = memory::desc({g.k}, memory::data_type::f32, tag::x);
  c.stride = {g.stride[0], g.stride[1]};
  c.dilation = {g.dilation[0] - 1, g.dilation[1] - 1};
  c.padding_l = {g.padding[0], g.padding[1]};
  c.padding_r = {(g.p - 1) * g.stride[0] + span_h - g.h - g.padding[0],
                 (g.q - 1) * g.stride[1] + span_w - g.w - g.padding[1]};
  return c;
}

/// make(x, w, y) for the descriptors to try, best first (see the header): the first usable
/// primitive descriptor it gives, or an empty one.
template <class Pd, class Make>
Pd first_usable(const ConvGeometry& g, const ConvProblem& c, Make&& make) {
  const memory::desc w = any_format(c.w);
  if (!g.nhwc() && g.c >= blocked_min_channels) {
    Pd pd = make(any_format(c.x), w, any_format(c.y));
    if (!unusable(pd)) return pd;
  }
  if (!g.nhwc()) {  // few input channels: the input plain, the output blocked (oneDNN's first-layer kernels)
    Pd pd = make(c.x, w, any_format(c.y));
    if (!unusable(pd)) return pd;
  }
  Pd pd = make(c.x, w, c.y);
  return unusable(pd) ? Pd() : pd;
}

/// The forward primitive descriptor for these formats (empty when oneDNN has none); the
/// backward passes take it as their hint.
inline ::dnnl::convolution_forward::primitive_desc forward_pd(const ConvProblem& c, const memory::desc& x,
                                                              const memory::desc& w, const memory::desc& y,
                                                              bool with_bias) {
  const ::dnnl::convolution_forward::desc d(::dnnl::prop_kind::forward_training,
                                            ::dnnl::algorithm::convolution_direct, x, w,
                                            with_bias ? c.bias : memory::desc(), y, c.stride, c.dilation,
                                            c.padding_l, c.padding_r);
  return {d, user_scratchpad(), runtime().engine, true};
}

/// A backward pass's primitive descriptor (Pd of the operation descriptor Desc:
/// convolution_backward_data or _weights) for these formats, the forward one as its hint;
/// empty when oneDNN has none. x, w, y: the input's, weight's and output's (or their
/// gradients') descriptors.
template <class Pd, class Desc>
Pd backward_pd(const ConvProblem& c, const memory::desc& x, const memory::desc& w, const memory::desc& y) {
  const auto hint = forward_pd(c, x, w, y, false);
  if (!hint) return Pd();
  const Desc d(::dnnl::algorithm::convolution_direct, x, w, y, c.stride, c.dilation, c.padding_l, c.padding_r);
  return Pd(d, user_scratchpad(), runtime().engine, hint, true);
}

/// y = conv2d(x, w) (+ bias, when not null), as nn::conv2d_forward computes it. False,
/// with nothing written, when oneDNN declines the geometry.
inline bool conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  using Pd = ::dnnl::convolution_forward::primitive_desc;
  return guarded("convolution forward", [&] {
    const auto c = conv_problem(g);
    if (!c) return false;
    if (g.n == 0) return true;
    const Pd pd = first_usable<Pd>(g, *c, [&](const memory::desc& xd, const memory::desc& wd, const memory::desc& yd) {
      return forward_pd(*c, xd, wd, yd, bias != nullptr);
    });
    if (!pd) return false;
    Arguments args;
    args.input(DNNL_ARG_SRC, c->x, x, pd.src_desc());
    args.input(DNNL_ARG_WEIGHTS, c->w, w, pd.weights_desc());
    if (bias != nullptr) args.input(DNNL_ARG_BIAS, c->bias, bias, pd.bias_desc());
    args.output(DNNL_ARG_DST, c->y, y, pd.dst_desc());
    args.run(::dnnl::convolution_forward(pd), pd);
    ++dnnl_counters().convolutions;
    return true;
  });
}

/// dx = the gradient of conv2d with respect to its input, given dy, as
/// nn::conv2d_backward_data computes it. False, with nothing written, when declined.
inline bool conv2d_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  using Pd = ::dnnl::convolution_backward_data::primitive_desc;
  return guarded("convolution backward data", [&] {
    const auto c = conv_problem(g);
    if (!c) return false;
    if (g.n == 0) return true;
    const Pd pd = first_usable<Pd>(g, *c, [&](const memory::desc& xd, const memory::desc& wd, const memory::desc& yd) {
      return backward_pd<Pd, ::dnnl::convolution_backward_data::desc>(*c, xd, wd, yd);
    });
    if (!pd) return false;
    Arguments args;
    args.input(DNNL_ARG_DIFF_DST, c->y, dy, pd.diff_dst_desc());
    args.input(DNNL_ARG_WEIGHTS, c->w, w, pd.weights_desc());
    args.output(DNNL_ARG_DIFF_SRC, c->x, dx, pd.diff_src_desc());
    args.run(::dnnl::convolution_backward_data(pd), pd);
    ++dnnl_counters().convolutions;
    return true;
  });
}

/// dw = the gradient of conv2d with respect to its weight, given x and dy (zeros for an
/// empty batch), as nn::conv2d_backward_filter computes it. False, with nothing written,
/// when declined.
inline bool conv2d_backward_filter(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  using Pd = ::dnnl::convolution_backward_weights::primitive_desc;
  return guarded("convolution backward filter", [&] {
    const auto c = conv_problem(g);
    if (!c) return false;
    if (g.n == 0) {
      std::fill(dw, dw + g.k * g.c_per_group() * g.r * g.s, 0.0f);
      return true;
    }
    const Pd pd = first_usable<Pd>(g, *c, [&](const memory::desc& xd, const memory::desc& wd, const memory::desc& yd) {
      return backward_pd<Pd, ::dnnl::convolution_backward_weights::desc>(*c, xd, wd, yd);
    });
    if (!pd) return false;
    Arguments args;
    args.input(DNNL_ARG_SRC, c->x, x, pd.src_desc());
    args.input(DNNL_ARG_DIFF_DST, c->y, dy, pd.diff_dst_desc());
    args.output(DNNL_ARG_DIFF_WEIGHTS, c->w, dw, pd.diff_weights_desc());
    args.run(::dnnl::convolution_backward_weights(pd), pd);
    ++dnnl_counters().convolutions;
    return true;
  });
}

}  // namespace et::detail::cpu_backend::dnnl

#endif  // ET_DNNL_PRIMITIVES
