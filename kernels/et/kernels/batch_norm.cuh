// Device code only: batch normalization over packed [N, C, H, W] tensors with its fused
// epilogue (backend/nn_shapes.hpp, BatchNormGeometry and ResidualPlanes: a residual added
// to a range of channels, then ReLU), in two passes forward and two backward:
//
//   batch_norm_statistics  (training) each channel's sum and sum of squares, around the
//                          channel's first value and in double; the block that ends a
//                          channel turns them into its mean, inverse deviation and running
//                          statistics
//   batch_norm_apply       y = relu?((x - mean) * invstd * weight + bias + residual); in eval
//                          from the running statistics (and then it saves the mean and the
//                          inverse deviation for the backward pass)
//   batch_norm_gradient_statistics
//                          each channel's sum of g and of g (x - mean), g = dy where the
//                          forward's ReLU let the value through (y > 0); the block that ends
//                          a channel makes its dweight, dbias and two coefficients of dx
//   batch_norm_gradient    dx = weight invstd g + b (x - mean) + c (b = c = 0 in eval), and
//                          the residual's gradient, g
//
// Every kernel visits a channel the same way: blockIdx.x is (channel, split); a channel's
// values are N runs of H * W (one an image), cut into parts where there are too few images
// to fill the GPU; a team of `team` lanes takes a part, 16 bytes an access where the runs
// allow it, and a run shorter than a warp gets a team of as many lanes as it needs (7 x 7
// and 1 x 1 planes keep the lanes busy). A channel's splits' sums are combined in a fixed
// order by the last of them to end (each channel has its own counter): the same results
// on every run. Included by include/et/backend/cuda/batch_norm.hpp; nvcc only.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "et/backend/nn_shapes.hpp"
#include "et/expr/readers.hpp"
#include "et/types.hpp"

namespace et::kernels {

inline constexpr int batch_norm_threads = 256;

/// How the blocks of a pass divide [N, C, HW]: a channel has n * parts units (image, part
/// of its run), `splits` blocks each take a range of them, a team of the block a unit.
struct ChannelPass {
  std::int64_t n, c, hw;
  std::int64_t parts, part_length;  ///< part_length a multiple of V when vectorized
  int splits;                       ///< blocks a channel: blockIdx.x = channel * splits + split
  int team;                         ///< lanes a unit, a power of two up to 32
  bool vectorized;

  __device__ std::int64_t channel() const { return blockIdx.x / static_cast<unsigned>(splits); }
  __device__ int split() const { return static_cast<int>(blockIdx.x % static_cast<unsigned>(splits)); }
};

/// The bits of one access of `Bytes` bytes, as the read-only path loads them.
template <int Bytes>
using AccessWord = std::conditional_t<Bytes == 16, uint4, std::conditional_t<Bytes == 8, uint2,
                   std::conditional_t<Bytes == 4, unsigned, unsigned short>>>;

/// W elements at p + at, in T's compute type. Through the read-only data path (ld.global.nc):
/// every tensor a pass reads is one it does not write, and such loads may be issued ahead of
/// the pass's stores, so that a thread's accesses (visit_channel's groups) are in flight at
/// once.
template <int W, class T>
__device__ __forceinline__ detail::Vec<detail::compute_t<T>, W> load_values(const T* p, std::int64_t at) {
  using Word = AccessWord<static_cast<int>(sizeof(T)) * W>;
  static_assert(sizeof(Word) == sizeof(T) * W, "et: batch_norm's kernels read 2, 4, 8 or 16 bytes an access");
  const Word bits = __ldg(reinterpret_cast<const Word*>(p + at));
  detail::Vec<T, W> loaded;
  std::memcpy(&loaded, &bits, sizeof bits);
  return detail::convert_vec<detail::compute_t<T>>(loaded);
}
template <int W, class T>
__device__ __forceinline__ void store_values(T* p, std::int64_t at, const detail::Vec<detail::compute_t<T>, W>& v) {
  *reinterpret_cast<detail::Vec<T, W>*>(p + at) = detail::convert_vec<T>(v);
}

/// Accesses a thread issues together (visit_channel): one at a time leaves too few bytes in
/// flight to cover memory's latency.
inline constexpr int batch_norm_unroll = 4;

/// Calls visit(width, image, position) for the values this thread takes of its block's
/// channel and split: `width` consecutive values (an integral_constant, V when vectorized,
/// else 1) at `position` of image `image`'s plane, batch_norm_unroll positions a step.
template <int V, class Visit>
__device__ __forceinline__ void visit_channel(const ChannelPass& p, Visit&& visit) {
  const int split = p.split(), lane = static_cast<int>(threadIdx.x) % p.team, teams = batch_norm_threads / p.team;
  const std::int64_t units = p.n * p.parts, per = (units + p.splits - 1) / p.splits;
  const std::int64_t last = ::min(units, (split + 1) * per);
  auto run = [&](auto width, std::int64_t image, std::int64_t begin, std::int64_t end) {
    const std::int64_t step = std::int64_t{p.team} * decltype(width)::value;
    for (std::int64_t k = begin + std::int64_t{lane} * decltype(width)::value; k < end; k += batch_norm_unroll * step) {
      ET_UNROLL
      for (int u = 0; u < batch_norm_unroll; ++u)
        if (k + u * step < end) visit(width, image, k + u * step);
    }
  };
  for (std::int64_t unit = split * per + static_cast<int>(threadIdx.x) / p.team; unit < last; unit += teams) {
    const std::int64_t image = unit / p.parts, begin = unit % p.parts * p.part_length;
    const std::int64_t end = ::min(p.hw, begin + p.part_length);
    if (p.vectorized) run(std::integral_constant<int, V>{}, image, begin, end);
    else run(std::integral_constant<int, 1>{}, image, begin, end);
  }
}

/// Where a pass finds a channel's mean and inverse deviation: the batch's (training, saved
/// by batch_norm_statistics), or computed from the running statistics (eval). T is the
/// activations' type, P the per-channel arrays' (T, or float for 16-bit T: mixed precision).
template <class T, class P = T>
struct ChannelStatistics {
  const detail::compute_t<T>* mean;  ///< null: from the running statistics
  const detail::compute_t<T>* invstd;
  const P* running_mean;
  const P* running_var;
  double eps;

  __device__ void get(std::int64_t c, detail::compute_t<T>& m, detail::compute_t<T>& s) const {
    using C = detail::compute_t<T>;
    if (mean) {
      m = mean[c];
      s = invstd[c];
    } else {
      m = static_cast<C>(running_mean[c]);
      s = static_cast<C>(1.0 / ::sqrt(detail::as_double(running_var[c]) + eps));
    }
  }
};

/// Two sums of the whole block, in a fixed order; valid in thread 0.
__device__ __forceinline__ void block_sum2(double& a, double& b) {
  __shared__ double sums[batch_norm_threads / 32][2];
  ET_UNROLL
  for (int delta = 16; delta > 0; delta /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, delta);
    b += __shfl_down_sync(0xffffffffu, b, delta);
  }
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32][0] = a, sums[threadIdx.x / 32][1] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    ET_UNROLL
    for (int w = 1; w < batch_norm_threads / 32; ++w) a += sums[w][0], b += sums[w][1];
  }
}

/// The block's two sums, combined with the other splits' of its channel: true in thread 0
/// of the block that finishes the channel (alone when it has one split; else the last of its
/// splits to end, by the channel's counter, which it sets back to 0:
/// backend/cuda/block_counter.hpp), a and b then the channel's totals, the splits added in
/// order; false in every other thread.
__device__ __forceinline__ bool channel_totals(const ChannelPass& p, double& a, double& b, double2* partials,
                                               unsigned* counters) {
  block_sum2(a, b);
  if (threadIdx.x != 0) return false;
  if (p.splits == 1) return true;
  const std::int64_t c = p.channel();
  partials[blockIdx.x] = make_double2(a, b);
  __threadfence();  // the partial is visible to every block before the count says so
  if (atomicAdd(counters + c, 1u) != static_cast<unsigned>(p.splits) - 1) return false;
  counters[c] = 0;
  __threadfence();
  a = b = 0;
  for (int s = 0; s < p.splits; ++s) {
    const double2 part = __ldcg(partials + c * p.splits + s);
    a += part.x;
    b += part.y;
  }
  return true;
}

template <class T, class P = T>
struct BatchNormStatistics {
  const T* x;
  P* running_mean;
  P* running_var;
  std::int64_t* batches_tracked;  ///< null: none to count
  detail::compute_t<T>* save_mean;
  detail::compute_t<T>* save_invstd;
  double2* partials;  ///< one a block (none when every channel has one split)
  unsigned* counters;  ///< one a channel
  double eps, momentum;
};

template <int V, class T, class P>
__global__ void __launch_bounds__(batch_norm_threads) batch_norm_statistics(ChannelPass p, BatchNormStatistics<T, P> a) {
  const std::int64_t c = p.channel();
  // Around the channel's first value, so that the sum of squares does not cancel for a large mean.
  const double pivot = detail::as_double(a.x[c * p.hw]);
  double sum = 0, squares = 0;
  visit_channel<V>(p, [&](auto width, std::int64_t image, std::int64_t k) {
    constexpr int W = decltype(width)::value;
    const auto v = load_values<W>(a.x, (image * p.c + c) * p.hw + k);
    ET_UNROLL
    for (int e = 0; e < W; ++e) {
      const double d = static_cast<double>(v.v[e]) - pivot;
      sum += d;
      squares += d * d;
    }
  });
  if (!channel_totals(p, sum, squares, a.partials, a.counters)) return;
  const double count = static_cast<double>(p.n * p.hw), m = a.momentum;
  const double shifted_mean = sum / count, variance = ::fmax(squares / count - shifted_mean * shifted_mean, 0.0);
  const double mean = pivot + shifted_mean;
  a.save_mean[c] = static_cast<detail::compute_t<T>>(mean);
  a.save_invstd[c] = static_cast<detail::compute_t<T>>(1.0 / ::sqrt(variance + a.eps));
  a.running_mean[c] = detail::from_double<P>((1 - m) * detail::as_double(a.running_mean[c]) + m * mean);
  a.running_var[c] = detail::from_double<P>((1 - m) * detail::as_double(a.running_var[c]) + m * variance * count / (count - 1));
  if (c == 0 && a.batches_tracked) ++*a.batches_tracked;
}

template <class T, class P = T>
struct BatchNormApply {
  const T* x;
  const P* weight;
  const P* bias;
  ChannelStatistics<T, P> statistics;
  detail::compute_t<T>* save_mean;  ///< eval with a backward to come: the statistics used, else null
  detail::compute_t<T>* save_invstd;
  detail::ResidualPlanes<const T> residual;
  T* y;
  bool relu;
};

template <int V, class T, class P>
__global__ void __launch_bounds__(batch_norm_threads) batch_norm_apply(ChannelPass p, BatchNormApply<T, P> a) {
  using C = detail::compute_t<T>;
  const std::int64_t c = p.channel();
  C mean, invstd;
  a.statistics.get(c, mean, invstd);
  if (a.save_mean && p.split() == 0 && threadIdx.x == 0) a.save_mean[c] = mean, a.save_invstd[c] = invstd;
  const C scale = static_cast<C>(a.weight[c]) * invstd, bias = static_cast<C>(a.bias[c]);
  const bool added = a.residual.covers(c);
  visit_channel<V>(p, [&](auto width, std::int64_t image, std::int64_t k) {
    constexpr int W = decltype(width)::value;
    const std::int64_t at = (image * p.c + c) * p.hw + k;
    auto v = load_values<W>(a.x, at);
    ET_UNROLL
    for (int e = 0; e < W; ++e) v.v[e] = (v.v[e] - mean) * scale + bias;
    if (added) {
      const auto r = load_values<W>(a.residual.plane(image, c), k);
      ET_UNROLL
      for (int e = 0; e < W; ++e) v.v[e] += r.v[e];
    }
    if (a.relu) {
      ET_UNROLL
      for (int e = 0; e < W; ++e) v.v[e] = v.v[e] < C(0) ? C(0) : v.v[e];  // NaN stays NaN, as et::relu
    }
    store_values<W>(a.y, at, v);
  });
}

/// dy where the forward's ReLU let the value through (y > 0) and 0 where it cut, as
/// et::relu's derivative (0 at 0); dy itself without ReLU.
template <int W, class T>
__device__ __forceinline__ detail::Vec<detail::compute_t<T>, W> masked_gradient(const T* dy, const T* y, bool relu,
                                                                               std::int64_t at) {
  using C = detail::compute_t<T>;
  auto g = load_values<W>(dy, at);
  if (relu) {
    const auto out = load_values<W>(y, at);
    ET_UNROLL
    for (int e = 0; e < W; ++e) g.v[e] = out.v[e] > C(0) ? g.v[e] : C(0);
  }
  return g;
}

template <class T, class P = T>
struct BatchNormGradientStatistics {
  const T* x;
  const T* y;  ///< the forward's output (ReLU's mask)
  const T* dy;
  const P* weight;
  const detail::compute_t<T>* mean;
  const detail::compute_t<T>* invstd;
  P* dweight;  ///< null: not needed
  P* dbias;
  detail::compute_t<T>* coefficients;  ///< [C][2]: b and c of dx
  double2* partials;
  unsigned* counters;
  bool relu, training;
};

template <int V, class T, class P>
__global__ void __launch_bounds__(batch_norm_threads)
    batch_norm_gradient_statistics(ChannelPass p, BatchNormGradientStatistics<T, P> a) {
  const std::int64_t c = p.channel();
  const auto mean = a.mean[c];
  double sum = 0, centered = 0;
  visit_channel<V>(p, [&](auto width, std::int64_t image, std::int64_t k) {
    constexpr int W = decltype(width)::value;
    const std::int64_t at = (image * p.c + c) * p.hw + k;
    const auto g = masked_gradient<W>(a.dy, a.y, a.relu, at);
    const auto v = load_values<W>(a.x, at);
    ET_UNROLL
    for (int e = 0; e < W; ++e) {
      sum += static_cast<double>(g.v[e]);
      centered += static_cast<double>(g.v[e]) * static_cast<double>(v.v[e] - mean);
    }
  });
  if (!channel_totals(p, sum, centered, a.partials, a.counters)) return;
  using C = detail::compute_t<T>;
  const double count = static_cast<double>(p.n * p.hw);
  const double invstd = static_cast<double>(a.invstd[c]), w_invstd = detail::as_double(a.weight[c]) * invstd;
  const double dweight = centered * invstd, dbias = sum;
  if (a.dweight) a.dweight[c] = detail::from_double<P>(dweight);
  if (a.dbias) a.dbias[c] = detail::from_double<P>(dbias);
  // In training dx = w invstd / M (M g - dbias - xhat dweight), xhat = (x - mean) invstd:
  // the mean and the variance depend on every x. In eval they are constants: dx = w invstd g.
  a.coefficients[2 * c] = a.training ? static_cast<C>(-w_invstd * invstd * dweight / count) : C(0);
  a.coefficients[2 * c + 1] = a.training ? static_cast<C>(-w_invstd * dbias / count) : C(0);
}

template <class T, class P = T>
struct BatchNormGradient {
  const T* x;
  const T* y;
  const T* dy;
  const P* weight;
  const detail::compute_t<T>* mean;
  const detail::compute_t<T>* invstd;
  const detail::compute_t<T>* coefficients;  ///< null: b = c = 0 (eval, no statistics pass)
  T* dx;
  detail::ResidualPlanes<T> dresidual;
  bool relu;
};

template <int V, class T, class P>
__global__ void __launch_bounds__(batch_norm_threads) batch_norm_gradient(ChannelPass p, BatchNormGradient<T, P> a) {
  using C = detail::compute_t<T>;
  const std::int64_t c = p.channel();
  const C mean = a.mean[c], scale = static_cast<C>(a.weight[c]) * a.invstd[c];
  const C xb = a.coefficients ? a.coefficients[2 * c] : C(0), shift = a.coefficients ? a.coefficients[2 * c + 1] : C(0);
  const bool added = a.dresidual.covers(c);
  visit_channel<V>(p, [&](auto width, std::int64_t image, std::int64_t k) {
    constexpr int W = decltype(width)::value;
    const std::int64_t at = (image * p.c + c) * p.hw + k;
    const auto g = masked_gradient<W>(a.dy, a.y, a.relu, at);
    if (added) store_values<W>(a.dresidual.plane(image, c), k, g);
    if (!a.dx) return;
    auto v = load_values<W>(a.x, at);
    ET_UNROLL
    for (int e = 0; e < W; ++e) v.v[e] = scale * g.v[e] + xb * (v.v[e] - mean) + shift;
    store_values<W>(a.dx, at, v);
  });
}

}  // namespace et::kernels
