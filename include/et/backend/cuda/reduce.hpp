// How reductions run on a CUDA device: the launchers for kernels/et/kernels/reduce.cuh.
// Full reductions take two launches (block partials, then one block to finish), or one
// for inputs one block reads in a round; axis reductions one (rows, or columns with few
// enough chunks) or two. Scratch space comes from the device's caching allocator,
// stream-ordered. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/reduce.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "et/backend/cuda/elementwise.hpp"
#include "et/backend/reduce_ops.hpp"
#include "et/kernels/reduce.cuh"

namespace et::detail::cuda_backend {

inline constexpr int reduce_threads = 256;

/// Vector width for reading an expression of nominal element type T.
template <class E>
inline constexpr int read_vector_width = vector_width<typename E::value_type>;

template <class Index, class E>
kernels::ReadMode choose_read_mode(const E& expr, const ElementwisePlan& plan, bool vector_allowed) {
  if (!plan.linear) return kernels::ReadMode::strided;
  if (vector_allowed && leaves_aligned<read_vector_width<E>>(expr)) return kernels::ReadMode::vector;
  return kernels::ReadMode::linear;
}

/// 32-bit indices when every index (plus one grid of overshoot) fits.
inline bool fits_int32(std::int64_t max_index) {
  return max_index + (std::int64_t{1} << 24) <= std::numeric_limits<std::int32_t>::max();
}

template <int Device, class Op, class Out, class E>
void reduce_into(Backend<Device>, Op, const E& expr, Out* out) {
  using Acc = typename Op::acc_type;
  constexpr int V = read_vector_width<E>, R = E::rank;
  const auto shape = expr.shape();
  const ElementwisePlan plan = plan_reads(shape, expr);
  const CudaCall call(Device, "reduction");
  note_expression_uses(expr);
  const std::int64_t n = checked_numel(shape);
  with_index_type(fits_int32(plan.max_index), [&](auto index_tag) {
    using Index = decltype(index_tag);
    const kernels::ReadMode mode = choose_read_mode<Index>(expr, plan, true);
    std::vector<std::shared_ptr<void>> buffers;
    auto reader = build_program<Index>(expr, shape, whole(shape), call, buffers);  // not const: see elementwise.hpp
    constexpr auto blocks_stage = &kernels::reduce_all_blocks<Op, reduce_threads, V, decltype(reader), R, Index, Out>;
    // Where one block reads it all in one round (four vectors a thread, or the V elements a
    // thread that stage 1 would take anyway), that block finishes the reduction too: one
    // launch, no scratch (a loss's mean over a batch: 4096 floats).
    const std::int64_t one_block = std::int64_t{reduce_threads} * V * (mode == kernels::ReadMode::vector ? 4 : 1);
    if (n <= one_block) {
      launch<blocks_stage>(call, 1, reduce_threads, 0, reader, n, mode, to_coord<Index>(shape), nullptr, out);
      return;
    }
    // Enough resident blocks to fill every SM twice over; each thread then streams.
    const std::int64_t wanted = (n + std::int64_t{reduce_threads} * V - 1) / (std::int64_t{reduce_threads} * V);
    const int blocks = static_cast<int>(
        std::clamp<std::int64_t>(wanted, 1, std::int64_t{device_properties(Device).multiprocessors} * 8));
    const auto scratch = allocate_bytes(Device, sizeof(Acc) * static_cast<std::size_t>(blocks));
    auto* partials = static_cast<Acc*>(scratch.get());
    launch<blocks_stage>(call, blocks, reduce_threads, 0, reader, n, mode, to_coord<Index>(shape), partials, out);
    launch<&kernels::reduce_all_finish<Op, reduce_threads, Out>>(call, 1, reduce_threads, 0, partials, blocks, n,
                                                                  out);
  });
}

template <int Device, class Op, class Out, class E>
void reduce_axis_into(Backend<Device>, Op, const E& expr, const AxisProblem& problem, Out* out) {
  using Acc = typename Op::acc_type;
  constexpr int V = read_vector_width<E>, R = E::rank;
  const auto shape = expr.shape();
  const ElementwisePlan plan = plan_reads(shape, expr);
  const CudaCall call(Device, "reduction");
  note_expression_uses(expr);
  const std::int64_t outputs = problem.outer * problem.inner;
  const int sms = device_properties(Device).multiprocessors;
  with_index_type(fits_int32(plan.max_index), [&](auto index_tag) {
    using Index = decltype(index_tag);
    std::vector<std::shared_ptr<void>> buffers;
    auto reader = build_program<Index>(expr, shape, whole(shape), call, buffers);  // not const: see elementwise.hpp
    const auto extents = to_coord<Index>(shape);
    if (problem.inner == 1) {
      const kernels::ReadMode mode = choose_read_mode<Index>(expr, plan, problem.length % V == 0);
      const int blocks = static_cast<int>(std::min<std::int64_t>(outputs, std::numeric_limits<std::int32_t>::max()));
      launch<&kernels::reduce_rows<Op, reduce_threads, V, decltype(reader), R, Index, Out>>(
          call, blocks, reduce_threads, 0, reader, outputs, problem.length, mode, extents, out);
      return;
    }
    const kernels::ReadMode mode = choose_read_mode<Index>(expr, plan, false);
    const std::int64_t column_blocks = (outputs + kernels::column_lanes - 1) / kernels::column_lanes;
    // Split the rows into chunks until there are ~16 blocks per SM, keeping >= 64 rows a chunk.
    const std::int64_t chunks = std::clamp<std::int64_t>(
        (std::int64_t{sms} * 16 + column_blocks - 1) / column_blocks, 1, std::max<std::int64_t>(1, problem.length / 64));
    // An empty axis still runs one chunk, which writes the identity (sum -> 0, prod -> 1).
    const std::int64_t rows_per_chunk = std::max<std::int64_t>(1, (problem.length + chunks - 1) / chunks);
    const std::int64_t used_chunks = std::max<std::int64_t>(1, (problem.length + rows_per_chunk - 1) / rows_per_chunk);
    std::shared_ptr<void> scratch;
    if (used_chunks > 1) scratch = allocate_bytes(Device, sizeof(Acc) * static_cast<std::size_t>(used_chunks * outputs));
    auto* partials = static_cast<Acc*>(scratch.get());
    const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(used_chunks));
    const dim3 block(kernels::column_lanes, kernels::column_rows);
    launch<&kernels::reduce_columns<Op, decltype(reader), R, Index, Out>>(
        call, grid, block, 0, reader, outputs, problem.length, problem.inner, rows_per_chunk, mode, extents, partials,
        out);
    if (used_chunks > 1) {
      const int finish_blocks = static_cast<int>((outputs + reduce_threads - 1) / reduce_threads);
      launch<&kernels::reduce_columns_finish<Op, Index, Out>>(call, finish_blocks, reduce_threads, 0, partials,
                                                              used_chunks, outputs, problem.length, out);
    }
  });
}

}  // namespace et::detail::cuda_backend
