// Pooling on the CPU through oneDNN (ET_DNNL_PRIMITIVES: ET_WITH_DNNL outside nvcc; engine, errors and arguments: dnnl.hpp),
// on packed float buffers in the geometry's layout, as backend/cpu/nn.hpp calls it for
// float, half and bfloat16 (double, and what oneDNN declines, run pool.hpp's loops).
//
//  - Formats: ours, nchw or nhwc, which oneDNN's JIT kernels read directly (reordering to
//    the blocked nChw16c and back made max pooling 2.5-4x slower: N=128, C=64, 3x3 stride 2
//    on 32x32).
//  - Average pooling: count_include_pad is pooling_avg_include_padding (the divisor is the
//    kernel's area: no window reaches past the padding), else _exclude_padding.
//  - Max pooling starts each window at float's lowest value and moves only to a strictly
//    greater one, so over inputs above that value it finds pool.hpp's maximum and its first
//    position in row-major window order. Not otherwise: etensor's NaN propagates (as
//    PyTorch's does) where oneDNN skips it, and a window of -inf would give float's lowest.
//    So max pooling first scans x and declines an input holding such a value (pool.hpp runs
//    it): one read of x, 1.2 ms of the 4.2 ms a forward pass takes on N=128, C=64, 32x32,
//    3x3 stride 2 (one thread; pool.hpp: 45 ms).
//  - Max pooling's backward pass takes the forward's workspace (each window's argmax), which
//    the operation does not keep: the forward pass runs again, in training mode, to make it.
//  - The right padding is derived from the output extent, as for convolution
//    (dnnl_conv.hpp): (P - 1) * stride + kernel - H - left, more than -stride.
#pragma once

#include "et/backend/cpu/dnnl.hpp"  // ET_DNNL_PRIMITIVES

#if defined(ET_DNNL_PRIMITIVES)

#include <cstdint>
#include <limits>
#include <optional>

#include "et/backend/nn_shapes.hpp"

namespace et::detail::cpu_backend::dnnl {

/// A pooling as oneDNN takes it: our buffers' descriptors, the algorithm, the window.
struct PoolProblem {
  memory::desc x, y;
  ::dnnl::algorithm algorithm;
  memory::dims kernel, stride, padding_l, padding_r;
};

/// Below this many input elements a pooling stays with pool.hpp (see smallest_dnnl_convolution).
inline constexpr std::int64_t smallest_dnnl_pooling = 2048;

/// The problem of g (max or average), or nullopt when it is small or an extent is past
/// oneDNN's int.
inline std::optional<PoolProblem> pool_problem(const PoolGeometry& g, bool max) {
  if (g.n * g.c * g.h * g.w < smallest_dnnl_pooling) return std::nullopt;
  if (!fits_int32({g.n * g.c * g.h * g.w, g.n * g.c * g.p * g.q, g.h + 2 * g.padding[0], g.w + 2 * g.padding[1],
                   g.kernel[0], g.kernel[1], g.stride[0], g.stride[1]}))
    return std::nullopt;
  PoolProblem p;
  p.x = activation_desc(g.layout, g.n, g.c, g.h, g.w);
  p.y = activation_desc(g.layout, g.n, g.c, g.p, g.q);
  p.algorithm = max                   ? ::dnnl::algorithm::pooling_max
                : g.count_include_pad ? ::dnnl::algorithm::pooling_avg_include_padding
                                      : ::dnnl::algorithm::pooling_avg_exclude_padding;
  p.kernel = {g.kernel[0], g.kernel[1]};
  p.stride = {g.stride[0], g.stride[1]};
  p.padding_l = {g.padding[0], g.padding[1]};
  p.padding_r = {(g.p - 1) * g.stride[0] + g.kernel[0] - g.h - g.padding[0],
                 (g.q - 1) * g.stride[1] + g.kernel[1] - g.w - g.padding[1]};
  return p;
}

/// Whether oneDNN's max pooling agrees with pool.hpp's on x (see the header): every value
/// above float's lowest, none NaN.
inline bool max_pool_agrees(const float* x, std::int64_t count) {
  constexpr float lowest = std::numeric_limits<float>::lowest();
  int outside = 0;
#pragma omp parallel for simd reduction(| : outside) if (count >= (std::int64_t{1} << 18)) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) outside |= !(x[i] > lowest);
  return outside == 0;
}

inline ::dnnl::pooling_forward::primitive_desc pool_forward_pd(const PoolProblem& p, ::dnnl::prop_kind kind) {
  const ::dnnl::pooling_forward::desc d(kind, p.algorithm, p.x, p.y, p.stride, p.kernel, p.padding_l, p.padding_r);
  return {d, user_scratchpad(), runtime().engine, true};
}

/// y = max_pool2d(x) or avg_pool2d(x), as pool.hpp computes it. False, with nothing
/// written, when oneDNN declines.
inline bool pool2d_forward(const PoolGeometry& g, bool max, const float* x, float* y) {
  return guarded(max ? "max pooling forward" : "average pooling forward", [&] {
    const auto p = pool_problem(g, max);
    if (!p) return false;
    if (g.n == 0) return true;
    if (max && !max_pool_agrees(x, g.n * g.c * g.h * g.w)) return false;
    const auto pd = pool_forward_pd(*p, ::dnnl::prop_kind::forward_inference);
    if (unusable(pd)) return false;
    Arguments args;
    args.input(DNNL_ARG_SRC, p->x, x, pd.src_desc());
    args.output(DNNL_ARG_DST, p->y, y, pd.dst_desc());
    args.run(::dnnl::pooling_forward(pd), pd);
    ++dnnl_counters().poolings;
    return true;
  });
}

/// dx = the gradient of max_pool2d (x: the forward input) or avg_pool2d (x unread, may be
/// null) given dy, as pool.hpp computes it. False, with nothing written, when declined.
inline bool pool2d_backward(const PoolGeometry& g, bool max, const float* dy, const float* x, float* dx) {
  using Pd = ::dnnl::pooling_backward::primitive_desc;
  return guarded(max ? "max pooling backward" : "average pooling backward", [&] {
    const auto p = pool_problem(g, max);
    if (!p) return false;
    if (g.n == 0) return true;
    if (max && !max_pool_agrees(x, g.n * g.c * g.h * g.w)) return false;
    const auto forward = pool_forward_pd(*p, ::dnnl::prop_kind::forward_training);
    if (unusable(forward)) return false;
    const ::dnnl::pooling_backward::desc d(p->algorithm, p->x, p->y, p->stride, p->kernel, p->padding_l, p->padding_r);
    const Pd pd(d, user_scratchpad(), runtime().engine, forward, true);
    if (unusable(pd)) return false;
    Arguments args;
    std::vector<std::shared_ptr<void>> keep;  // the workspace's and y's blocks, through both runs
    if (max) {
      const memory workspace = cached_memory(forward.workspace_desc(), keep);
      Arguments again;
      again.input(DNNL_ARG_SRC, p->x, x, forward.src_desc());
      again.pass(DNNL_ARG_DST, cached_memory(forward.dst_desc(), keep));  // y again, unused
      again.pass(DNNL_ARG_WORKSPACE, workspace);
      again.run(::dnnl::pooling_forward(forward), forward);
      args.pass(DNNL_ARG_WORKSPACE, workspace);
    }
    args.input(DNNL_ARG_DIFF_DST, p->y, dy, pd.diff_dst_desc());
    args.output(DNNL_ARG_DIFF_SRC, p->x, dx, pd.diff_src_desc());
    args.run(::dnnl::pooling_backward(pd), pd);
    ++dnnl_counters().poolings;
    return true;
  });
}

}  // namespace et::detail::cpu_backend::dnnl

#endif  // ET_DNNL_PRIMITIVES
