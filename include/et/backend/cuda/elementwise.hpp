// How an elementwise assignment runs on a CUDA device: exactly one kernel launch on the
// device's stream, whatever the size of the expression tree (plus one per materialized
// occurrence of a shared subexpression, eval/program.hpp). Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/elementwise.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "et/backend/backend.hpp"
#include "et/backend/cuda/launch.hpp"
#include "et/eval/evaluator.hpp"
#include "et/kernels/elementwise.cuh"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail::cuda_backend {

inline constexpr int block_threads = 256;

/// Elements per 16-byte access of the output type.
template <class T>
inline constexpr int vector_width = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

inline bool aligned_for(const void* p, std::size_t group_bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % std::min<std::size_t>(group_bytes, 16) == 0;
}

/// leaves_aligned's walker (a functor: compiled once per leaf type, not per expression).
template <int V>
struct AlignCheck {
  bool ok = true;
  template <class T, int R, class D>
  void operator()(const Tensor<T, R, D>& leaf) {
    ok = ok && aligned_for(leaf.data(), sizeof(T) * V);
  }
  template <class Leaf>
  void operator()(const Leaf&) {}  // a generator reads no memory
};

/// True when every tensor operand can be read V elements at a time (16-byte aligned, or
/// V*sizeof aligned for narrower groups).
template <int V, class E>
bool leaves_aligned(const E& expr) {
  AlignCheck<V> check;
  for_each_leaf(expr, check);
  return check.ok;
}

/// True when the output and every tensor operand can be accessed V elements at a time.
template <int V, class T, int R, class D, class E>
bool vector_aligned(const Tensor<T, R, D>& dst, const E& expr) {
  return aligned_for(dst.data(), sizeof(T) * V) && leaves_aligned<V>(expr);
}

/// Grid size for `work` units of one thread each (up to the grid limit): plenty of
/// resident blocks hide memory latency behind other blocks' arithmetic.
/// Notes every tensor a launch reads or writes as used on the current stream, so that the
/// allocator orders their frees after it (runtime/allocator.hpp). Nothing to do while only
/// default streams were ever current.
struct NoteUse {  // a functor, not a lambda: compiled once per leaf type, not per expression
  template <class T, int R, class D>
  void operator()(const Tensor<T, R, D>& leaf) const {
    note_stream_use(leaf.storage());
  }
  template <class Leaf>
  void operator()(const Leaf&) const {}  // a generator reads no memory
};
template <class... Operands>
void note_expression_uses(const Operands&... operands) {
  if (!several_streams().load(std::memory_order_relaxed)) return;
  (for_each_leaf(operands, NoteUse{}), ...);
}

/// The most threads one launch of grid_for() blocks has: the linear kernel runs each thread
/// once (no grid-stride loop), so it takes only work that fits.
inline constexpr std::int64_t max_grid_threads = std::int64_t{std::numeric_limits<std::int32_t>::max()} * block_threads;

inline int grid_for(std::int64_t work) {
  return static_cast<int>(std::clamp<std::int64_t>((work + block_threads - 1) / block_threads, 1,
                                                   std::numeric_limits<std::int32_t>::max()));
}

/// Thread indices reach one block (of strided_unroll elements each) past the work: 32-bit
/// indices serve when every offset plus that margin fits.
inline bool fits_int32_launch(std::int64_t max_index) {
  constexpr std::int64_t margin = std::int64_t{block_threads} * 16;
  return max_index + margin <= std::numeric_limits<std::int32_t>::max();
}

/// A box of an index space: the elements at origin + c, 0 <= c < extent on every axis.
template <std::size_t R>
struct Box {
  std::array<std::int64_t, R> origin{};
  std::array<std::int64_t, R> extent{};
};
template <std::size_t R>
Box<R> whole(const std::array<std::int64_t, R>& shape) {
  return {{}, shape};
}

/// The program of `expr` read in the box `box` of the index space `shape` on call.device().
/// Occurrences of a shared subexpression that hold operands of their own are materialized
/// first (over the box), on the same stream, into buffers kept in `buffers` until the
/// caller's launches are queued.
template <class Index, class E, std::size_t N, int R = static_cast<int>(N)>
program_t<R, Index, E> build_program(const E& expr, const std::array<std::int64_t, N>& shape, const Box<N>& box,
                                     const CudaCall& call, std::vector<std::shared_ptr<void>>& buffers) {
  auto materialize = [&](const auto& program, int binding) -> const void* {
    const std::int64_t n = checked_numel(box.extent);
    buffers.push_back(allocate_bytes(call.device(), program.binding_size(binding) * static_cast<std::size_t>(n)));
    launch<&kernels::materialize_binding<std::remove_cvref_t<decltype(program)>, R, Index>>(
        call, grid_for(n), block_threads, 0, program, binding, buffers.back().get(), to_coord<Index>(box.extent),
        static_cast<Index>(n));
    return buffers.back().get();
  };
  return make_program<R, Index>(expr, shape, materialize, box.origin);
}

/// The strides of the destination and of every operand broadcast to the index space (a
/// functor: compiled once per leaf type, not per expression).
template <std::size_t R>
struct OperandStrides {
  const std::array<std::int64_t, R>& shape;
  std::vector<std::array<std::int64_t, R>> strides;
  template <class T, int N, class D>
  void operator()(const Tensor<T, N, D>& leaf) {
    strides.push_back(broadcast_strides(leaf.shape(), leaf.strides(), shape));
  }
  template <class Gen, int N, class D>
  void operator()(const GeneratorExpr<Gen, N, D>& leaf) {  // reads its generator at its own row-major index
    strides.push_back(broadcast_strides(leaf.shape(), contiguous_strides(leaf.shape()), shape));
  }
};

/// Splits `box` until every offset and index inside each part fits a 32-bit launch,
/// halving the axis that reaches furthest (PyTorch's TensorIterator splits the same way
/// for its 32-bit kernels).
template <std::size_t R>
void split_box(const Box<R>& box, const std::vector<std::array<std::int64_t, R>>& strides,
               std::vector<Box<R>>& boxes) {
  std::int64_t reach = checked_numel(box.extent);
  std::array<std::int64_t, R> span{};
  for (const auto& operand : strides) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d != R; ++d) {
      offset += (box.extent[d] - 1) * operand[d];
      span[d] = std::max(span[d], (box.extent[d] - 1) * std::max<std::int64_t>(operand[d], 1));
    }
    reach = std::max(reach, offset);
  }
  if (fits_int32_launch(reach)) {
    boxes.push_back(box);
    return;
  }
  const std::size_t axis = static_cast<std::size_t>(std::max_element(span.begin(), span.end()) - span.begin());
  Box<R> first = box, second = box;
  first.extent[axis] = box.extent[axis] / 2;
  second.extent[axis] = box.extent[axis] - first.extent[axis];
  second.origin[axis] += first.extent[axis];
  split_box(first, strides, boxes);
  split_box(second, strides, boxes);
}

/// The boxes the strided kernel evaluates dst = expr in: the whole index space when its
/// offsets fit 32 bits, else boxes of it that each do. So no expression needs a kernel with
/// 64-bit offsets of its own (its code would be compiled for every expression, for arrays
/// that few programs have).
template <class T, int R, class D, class E>
std::vector<Box<R>> strided_boxes(const Tensor<T, R, D>& dst, const E& expr, std::int64_t max_index) {
  std::vector<Box<R>> boxes;
  if (fits_int32_launch(max_index)) {
    boxes.push_back(whole(dst.shape()));
  } else {
    OperandStrides<R> operands{dst.shape(), {dst.strides()}};
    for_each_leaf(expr, operands);
    split_box(whole(dst.shape()), operands.strides, boxes);
  }
  return boxes;
}

/// The strided kernel's launch: tiles of the last two axes, with shared memory for the
/// operands read transposed, when there are such operands (kernels::reads_transposed) and
/// both axes are long enough to fill a tile; else consecutive elements per block.
template <class Index>
struct StridedLaunch {
  int blocks = 1;
  std::size_t shared_bytes = 0;
  kernels::TileGrid<Index> tiles;
};
template <class Index, class Program, class Writer, std::size_t N>
StridedLaunch<Index> plan_strided(Program& program, const Writer& writer, const std::array<std::int64_t, N>& shape,
                                  std::int64_t n) {
  constexpr int R = static_cast<int>(N);
  StridedLaunch<Index> launch;
  launch.blocks = grid_for((n + kernels::strided_unroll - 1) / kernels::strided_unroll);
  if constexpr (R >= 2) {
    // Rows: the output consecutive along a last axis long enough to fill most of a warp's
    // run, every operand consecutive or broadcast along it (kernels::strided_rows).
    RowsReadable<R, Index> unit;
    for_each_leaf_reader(program, unit);
    const std::int64_t row_length = shape[N - 1];
    if (n > 0 && unit.ok && writer.strides[R - 1] == 1 && row_length >= kernels::row_run / 2 &&
        rows_path_enabled().load(std::memory_order_relaxed)) {
      const std::int64_t rows = n / row_length, runs = (row_length + kernels::row_run - 1) / kernels::row_run;
      const std::int64_t warps = block_threads / 32, blocks = (rows + warps - 1) / warps * runs;
      if (blocks <= std::numeric_limits<std::int32_t>::max()) {
        launch.blocks = static_cast<int>(blocks);
        launch.tiles.rows = static_cast<Index>(rows);
        launch.tiles.cols = static_cast<Index>(row_length);
        launch.tiles.runs = static_cast<Index>(runs);
        return launch;
      }
    }
    const std::int64_t rows = shape[N - 2], cols = shape[N - 1];
    constexpr std::int64_t shortest = kernels::tile / 2, most_shared = 48 * 1024;
    if (n == 0 || rows < shortest || cols < shortest) return launch;
    std::size_t bytes = 0;
    auto count = [&](auto& reader) {
      using T = std::remove_cvref_t<decltype(*reader.data)>;
      if (kernels::reads_transposed<R, Index>(reader.strides)) bytes += kernels::staged_tile_bytes<T>;
    };
    for_each_tensor_reader(program, count);
    // Staged operands are read at r + c * tile_pitch from the tile's own coordinates.
    const bool fits = rows + cols * kernels::tile_pitch < std::numeric_limits<Index>::max();
    if (bytes == 0 || bytes > most_shared || !fits) return launch;
    const std::int64_t tiles_r = (rows + kernels::tile - 1) / kernels::tile, tiles_c = (cols + kernels::tile - 1) / kernels::tile;
    const std::int64_t blocks = n / (rows * cols) * tiles_r * tiles_c;
    if (blocks > std::numeric_limits<std::int32_t>::max()) return launch;
    launch.blocks = static_cast<int>(blocks);
    launch.shared_bytes = bytes;
    launch.tiles = {static_cast<Index>(rows), static_cast<Index>(cols), static_cast<Index>(tiles_r),
                    static_cast<Index>(tiles_c)};
  }
  return launch;
}

/// Counts a strided launch by its kind (eval/evaluator.hpp's ElementwiseCounters).
template <class Index>
void count_strided_launch(const kernels::TileGrid<Index>& tiles) {
  ElementwiseCounters& counters = elementwise_counters();
  ++(tiles.runs > 0 ? counters.rows : tiles.tiles_c > 0 ? counters.tiled : counters.general);
}

template <int I, class T, int R, class E>
void run_elementwise(Backend<I>, const Tensor<T, R, Cuda<I>>& dst, const E& expr) {
  const ElementwisePlan plan = plan_elementwise(dst, expr);
  const CudaCall call(I, "expression");
  note_expression_uses(dst, expr);
  const std::int64_t n = dst.numel();
  std::vector<std::shared_ptr<void>> buffers;
  // The kernel arguments are deliberately NOT const: with `const auto program = ...`,
  // nvcc 13's cicc takes time exponential in the nesting depth of the reader type (depth 5:
  // over 100 s instead of 7 s) for byte-identical PTX. docs/design.md has the reproducer.
  constexpr int V = vector_width<T>;
  // The linear kernel also takes operands broadcast along leading or trailing axes (a bias
  // row or column), read at (i / div) % mod: plan.wrapped (eval/evaluator.hpp).
  const bool vectorized = plan.wrapped && plan.wrap_granule % V == 0 && vector_aligned<V>(dst, expr);
  const std::int64_t linear_threads = vectorized ? (n + V - 1) / V : n;
  if (plan.wrapped && linear_threads <= max_grid_threads) {
    ++(vectorized ? elementwise_counters().vector : elementwise_counters().linear);
    // 64-bit indices: no slower on large arrays (addresses are 64-bit anyway) and faster on
    // tiny ones (a CUDA graph of dependent launches on 1024 floats, H200: 0.92 us per
    // kernel against 0.98 with 32-bit indices, the rest of the kernel alike); and the same
    // program type as the fused backward's readers (eval/tape.hpp).
    using Index = std::int64_t;
    auto program = build_program<Index>(expr, dst.shape(), whole(dst.shape()), call, buffers);
    auto writer = make_writer<Index>(dst);
    launch<&kernels::elementwise_linear<V, decltype(writer), decltype(program), Index>>(
        call, grid_for(linear_threads), block_threads, 0, writer, program, n, vectorized);
  } else {
    using Index = std::int32_t;
    for (const Box<R>& box : strided_boxes(dst, expr, plan.max_index)) {
      auto program = build_program<Index>(expr, dst.shape(), box, call, buffers);
      auto writer = make_writer<Index>(dst, box.origin);
      const std::int64_t count = checked_numel(box.extent);
      const StridedLaunch<Index> strided = plan_strided<Index>(program, writer, box.extent, count);
      count_strided_launch(strided.tiles);
      launch<&kernels::elementwise_strided<decltype(writer), decltype(program), R, Index>>(
          call, strided.blocks, block_threads, strided.shared_bytes, writer, program, to_coord<Index>(box.extent),
          static_cast<Index>(count), strided.tiles);
      buffers.clear();  // freed in stream order: the next box may reuse them
    }
  }
}

/// Runs a fused backward program (eval/tape.hpp) over the index space `shape`: one
/// kernel launch.
template <int I, class Program, std::size_t N>
void run_gradient(Backend<I>, Program program, const std::array<std::int64_t, N>& shape, bool linear) {
  const std::int64_t n = checked_numel(shape);
  if (n == 0) return;
  const CudaCall call(I, "autograd backward");
  launch<&kernels::gradient<Program, static_cast<int>(N)>>(call, grid_for(n), block_threads, 0, program,
                                                          to_coord<std::int64_t>(shape), n, linear);
}

}  // namespace et::detail::cuda_backend
