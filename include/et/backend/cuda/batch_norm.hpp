// Batch normalization on a CUDA device (ops/batch_norm.hpp calls it through the backend tag,
// backend/backend.hpp): the launchers of kernels/et/kernels/batch_norm.cuh, for every
// floating type on packed nchw tensors. Forward: the batch's statistics and then the
// normalized output with its epilogue (a residual, ReLU), two kernels in training and one in
// eval; backward: the gradient's per-channel sums and then dx and the residual's gradient,
// two kernels (one in eval when weight and bias need no gradient). T is the activations'
// type, P the per-channel arrays' (weight, bias, running statistics and their gradients): T,
// or float for a 16-bit T (mixed precision, as cuDNN's batch norm of half). Only for nvcc.
//
// etensor's own kernels rather than cuDNN's batch norm (which PyTorch calls for nchw float):
// cuDNN's nchw calls fuse neither the ReLU nor the residual that follow every batch norm of a
// residual network, and each of those is one more pass over the activations, forward and
// backward (docs/benchmarks.md, "BatchNorm, ReLU and the residual in one pass").
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/batch_norm.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "et/backend/cuda/block_counter.hpp"
#include "et/backend/cuda/elementwise.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/expr/operators.hpp"
#include "et/kernels/batch_norm.cuh"

namespace et::detail::cuda_backend {

/// How a pass's blocks divide g's channels (kernels/et/kernels/batch_norm.cuh): about one
/// wave of resident blocks in all (fewer for a small tensor), at least one a channel; where
/// the images are too few to give every team of those blocks one, the planes are cut into
/// parts (each of at least one access per lane).
template <class T>
kernels::ChannelPass channel_pass(int device, const BatchNormGeometry& g, bool vectorized) {
  constexpr int threads = kernels::batch_norm_threads;
  const int width = vectorized ? vector_width<T> : 1;
  const std::int64_t accesses = g.hw / width;
  int team = 1;
  while (team < 32 && team < accesses) team *= 2;
  const int teams = threads / team;
  // One wave of resident blocks, but no more blocks than give each thread four accesses:
  // a small batch norm is a few short blocks, not many that each wait on memory once.
  const std::int64_t wave = std::min<std::int64_t>(std::int64_t{device_properties(device).multiprocessors} * (2048 / threads),
                                                   (g.n * g.c * accesses + 4 * threads - 1) / (4 * threads));
  const std::int64_t blocks_per_channel = std::max<std::int64_t>(1, wave / std::max<std::int64_t>(g.c, 1));
  const std::int64_t wanted_units = blocks_per_channel * teams;
  std::int64_t parts = 1;
  if (g.n < wanted_units)
    parts = std::clamp<std::int64_t>((wanted_units + g.n - 1) / g.n, 1, std::max<std::int64_t>(1, accesses / team));
  const std::int64_t part_accesses = (accesses + parts - 1) / parts;
  parts = std::max<std::int64_t>(1, (accesses + part_accesses - 1) / part_accesses);  // none empty
  const std::int64_t units = g.n * parts;
  std::int64_t splits = std::clamp<std::int64_t>((units + teams - 1) / teams, 1, blocks_per_channel);
  const std::int64_t units_per_split = (units + splits - 1) / splits;
  splits = (units + units_per_split - 1) / units_per_split;  // none empty
  if (g.c * splits > std::numeric_limits<std::int32_t>::max())
    throw ShapeError("et: batch_norm over " + std::to_string(g.c) + " channels: one launch takes up to 2^31 - 1");
  return {g.n, g.c, g.hw, parts, part_accesses * width, static_cast<int>(splits), team, vectorized};
}

/// t's elements, or null for an undefined tensor (an output nobody needs).
template <class T, int R, class D>
T* data_or_null(const Tensor<T, R, D>& t) {
  return t.defined() ? t.data() : nullptr;
}

/// True when every tensor of a pass can be read 16 bytes at a time: planes of a multiple of
/// V values, aligned starts (and the residual's planes likewise).
template <class T>
bool planes_vectorizable(const BatchNormGeometry& g, std::initializer_list<const void*> data, std::int64_t image_step,
                         std::int64_t channel_step) {
  constexpr int V = vector_width<T>;
  if (V == 1 || g.hw % V != 0 || image_step % V != 0 || channel_step % V != 0) return false;
  return std::all_of(data.begin(), data.end(), [](const void* p) { return p == nullptr || aligned_for(p, 16); });
}

/// What a statistics pass's splits combine through: a partial a block and a counter a
/// channel, where the channels have several splits (none otherwise: each block ends its own).
struct SplitSums {
  std::shared_ptr<void> memory;
  unsigned* counters = nullptr;
  SplitSums(const CudaCall& call, const kernels::ChannelPass& pass, int blocks) {
    if (pass.splits == 1) return;
    memory = allocate_bytes(call.device(), sizeof(double2) * static_cast<std::size_t>(blocks));
    counters = block_counters(call, static_cast<std::size_t>(pass.c));
  }
  double2* partials() const { return static_cast<double2*>(memory.get()); }
};

template <int I, class T, class P>
void batch_norm_forward(Backend<I>, const BatchNormGeometry& g, const Tensor<T, 4, Cuda<I>>& x,
                        const Tensor<P, 1, Cuda<I>>& weight, const Tensor<P, 1, Cuda<I>>& bias,
                        const Tensor<P, 1, Cuda<I>>& running_mean, const Tensor<P, 1, Cuda<I>>& running_var,
                        const Tensor<T, 4, Cuda<I>>* residual, const Tensor<T, 4, Cuda<I>>& y,
                        const Tensor<compute_t<T>, 1, Cuda<I>>& save_mean,
                        const Tensor<compute_t<T>, 1, Cuda<I>>& save_invstd,
                        const Tensor<std::int64_t, 0, Cuda<I>>* batches_tracked) {
  constexpr int V = vector_width<T>;
  const CudaCall call(I, "batch_norm");
  note_stream_uses(x, weight, bias, running_mean, running_var, y);
  if (save_mean.defined()) note_stream_uses(save_mean, save_invstd);
  if (residual) note_stream_uses(*residual);
  if (batches_tracked) note_stream_uses(*batches_tracked);
  if (g.c == 0 || g.count() == 0) {  // nothing to normalize; a count to keep all the same
    if (batches_tracked) run_elementwise(Backend<I>{}, *batches_tracked, *batches_tracked + std::int64_t{1});
    return;
  }
  using C = compute_t<T>;
  const T* residual_data = residual ? residual->data() : nullptr;
  const std::int64_t image_step = residual ? residual->strides()[0] : 0, channel_step = residual ? residual->strides()[1] : 0;
  const auto pass = channel_pass<T>(
      I, g, planes_vectorizable<T>(g, {x.data(), y.data(), residual_data}, image_step, channel_step));
  const int blocks = static_cast<int>(g.c * pass.splits);
  kernels::ChannelStatistics<T, P> statistics{nullptr, nullptr, running_mean.data(), running_var.data(), g.eps};
  if (g.training) {
    const SplitSums sums(call, pass, blocks);
    const kernels::BatchNormStatistics<T, P> args{x.data(), running_mean.data(), running_var.data(),
                                                  batches_tracked ? batches_tracked->data() : nullptr, save_mean.data(),
                                                  save_invstd.data(), sums.partials(), sums.counters, g.eps, g.momentum};
    launch<&kernels::batch_norm_statistics<V, T, P>>(call, blocks, kernels::batch_norm_threads, 0, pass, args);
    statistics.mean = save_mean.data();
    statistics.invstd = save_invstd.data();
  }
  C* eval_mean = g.training ? nullptr : data_or_null(save_mean);  // eval: saved when a backward needs them
  C* eval_invstd = g.training ? nullptr : data_or_null(save_invstd);
  const kernels::BatchNormApply<T, P> args{
      x.data(), weight.data(), bias.data(), statistics, eval_mean, eval_invstd,
      {residual_data, g.residual_first, g.residual_channels, image_step, channel_step}, y.data(), g.relu};
  launch<&kernels::batch_norm_apply<V, T, P>>(call, blocks, kernels::batch_norm_threads, 0, pass, args);
}

/// dx (where defined), dweight and dbias (where defined; in training always both), and the
/// residual's gradient (packed [N, residual_channels, H, W]) from dy and what the forward
/// pass saved: its input x and output y (read for ReLU's mask) and the statistics it used.
template <int I, class T, class P>
void batch_norm_backward(Backend<I>, const BatchNormGeometry& g, const Tensor<T, 4, Cuda<I>>& x,
                         const Tensor<T, 4, Cuda<I>>& y, const Tensor<T, 4, Cuda<I>>& dy,
                         const Tensor<P, 1, Cuda<I>>& weight, const Tensor<compute_t<T>, 1, Cuda<I>>& mean,
                         const Tensor<compute_t<T>, 1, Cuda<I>>& invstd, const Tensor<T, 4, Cuda<I>>& dx,
                         const Tensor<P, 1, Cuda<I>>& dweight, const Tensor<P, 1, Cuda<I>>& dbias,
                         const Tensor<T, 4, Cuda<I>>* dresidual) {
  constexpr int V = vector_width<T>;
  const CudaCall call(I, "batch_norm backward");
  note_stream_uses(x, dy, weight, mean, invstd);
  if (g.relu) note_stream_uses(y);
  if (dx.defined()) note_stream_uses(dx);
  if (dweight.defined()) note_stream_uses(dweight);
  if (dbias.defined()) note_stream_uses(dbias);
  if (dresidual) note_stream_uses(*dresidual);
  if (g.c == 0 || g.count() == 0) {  // eval over no values: their gradients sum to 0
    if (dweight.defined()) run_elementwise(Backend<I>{}, dweight, ScalarExpr<P>(P(0)));
    if (dbias.defined()) run_elementwise(Backend<I>{}, dbias, ScalarExpr<P>(P(0)));
    return;
  }
  T* dresidual_data = dresidual ? dresidual->data() : nullptr;
  const T* y_data = g.relu ? y.data() : nullptr;
  const std::int64_t image_step = g.residual_channels * g.hw;
  const auto pass = channel_pass<T>(
      I, g, planes_vectorizable<T>(g, {x.data(), y_data, dy.data(), data_or_null(dx), dresidual_data}, image_step, g.hw));
  const int blocks = static_cast<int>(g.c * pass.splits);
  std::shared_ptr<void> coefficients;
  if (g.training || dweight.defined() || dbias.defined()) {
    coefficients = allocate_bytes(I, 2 * sizeof(compute_t<T>) * static_cast<std::size_t>(g.c));
    const SplitSums sums(call, pass, blocks);
    const kernels::BatchNormGradientStatistics<T, P> args{
        x.data(), y_data, dy.data(), weight.data(), mean.data(), invstd.data(), data_or_null(dweight), data_or_null(dbias),
        static_cast<compute_t<T>*>(coefficients.get()), sums.partials(), sums.counters, g.relu, g.training};
    launch<&kernels::batch_norm_gradient_statistics<V, T, P>>(call, blocks, kernels::batch_norm_threads, 0, pass, args);
  }
  if (!dx.defined() && !dresidual) return;
  const kernels::BatchNormGradient<T, P> args{
      x.data(), y_data, dy.data(), weight.data(), mean.data(), invstd.data(),
      static_cast<const compute_t<T>*>(coefficients.get()), data_or_null(dx),
      {dresidual_data, g.residual_first, g.residual_channels, image_step, g.hw}, g.relu};
  launch<&kernels::batch_norm_gradient<V, T, P>>(call, blocks, kernels::batch_norm_threads, 0, pass, args);
}

}  // namespace et::detail::cuda_backend
