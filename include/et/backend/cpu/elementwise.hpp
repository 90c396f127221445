// How an elementwise assignment runs on the CPU: one OpenMP-parallel loop over the
// output. The contiguous path is a plain `parallel for simd` loop the compiler
// vectorizes; other layouts split the index range per thread and walk coordinates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "et/backend/backend.hpp"
#include "et/eval/evaluator.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail::cpu_backend {

/// Below this many elements a parallel region costs more than it saves.
inline constexpr std::int64_t parallel_threshold = std::int64_t{1} << 15;

/// The program of `expr` read in the index space `shape`. Occurrences of a shared
/// subexpression that hold operands of their own are materialized first, into buffers
/// kept in `buffers` until the caller has run the program (eval/program.hpp).
template <class Index, class E, std::size_t N, int R = static_cast<int>(N)>
program_t<R, Index, E> build_program(const E& expr, const std::array<std::int64_t, N>& shape,
                                     std::vector<std::shared_ptr<void>>& buffers) {
  auto materialize = [&](const auto& program, int binding) -> const void* {
    const Index n = static_cast<Index>(checked_numel(shape));
    buffers.push_back(allocate_host(program.binding_size(binding) * static_cast<std::size_t>(n)));
    void* out = buffers.back().get();
    const auto extents = to_coord<Index>(shape);
#pragma omp parallel for schedule(static) if (n >= parallel_threshold)
    for (Index i = 0; i < n; ++i) program.store_binding(binding, out, i, unravel<R, Index>(i, extents));
    return out;
  };
  return make_program<R, Index>(expr, shape, materialize);
}

/// Inside a parallel region: the calling thread's contiguous share [begin, end) of n items.
template <class Index>
std::pair<Index, Index> thread_share(Index n) {
  Index threads = 1, thread = 0;
#if defined(_OPENMP)
  threads = static_cast<Index>(omp_get_num_threads());
  thread = static_cast<Index>(omp_get_thread_num());
#endif
  const Index chunk = (n + threads - 1) / threads;
  const Index begin = std::min<Index>(n, chunk * thread);
  return {begin, std::min<Index>(n, begin + chunk)};
}

/// Calls f(i, coordinate of i) for every linear index i < n of a row-major index space,
/// in one parallel region: each thread walks its contiguous range like an odometer.
template <int R, class Index, class F>
void for_each_coordinate(Index n, const Coord<R, Index>& extents, const F& f) {
  if (n == 0) return;  // an extent of 0: unravel would divide by it
  if constexpr (R == 0) {
    f(Index{0}, Coord<R, Index>{});  // a scalar: one element, no axis to walk
  } else {
#pragma omp parallel if (n >= parallel_threshold)
    {
      const auto [begin, end] = thread_share(n);
      // Along the last axis in an inner loop of its own (the compiler keeps the other
      // coordinates' offsets out of it), the odometer stepped once a row.
      Coord<R, Index> c = unravel<R, Index>(begin, extents);
      const Index last = extents.c[R - 1];
      for (Index i = begin; i < end;) {
        const Index row_end = std::min<Index>(end, i + (last - c.c[R - 1]));
        for (; i < row_end; ++i, ++c.c[R - 1]) f(i, c);
        c.c[R - 1] = 0;
        for (int d = R - 2; d >= 0; --d) {
          if (++c.c[d] < extents.c[d]) break;
          c.c[d] = 0;
        }
      }
    }
  }
}

/// The row loop: the output consecutive along the last axis, every operand consecutive or
/// broadcast along it (RowsReadable). Rows are shared out among the threads; each row's
/// operands are rebased to its first element (RebaseTo) and read at element j of the row in
/// a loop the compiler vectorizes, as it does a hand-written stencil's inner loop: as
/// linear(j) (data[j], contiguous loads) where every operand is consecutive along the row
/// (`unit`), else at row_coordinate(j) (j times a last stride of 1 or 0, known only at run
/// time: gathers, about 10x slower on AVX2).
template <class Reader, class Writer, int R, class Index>
void run_rows(const Reader& reader, const Writer& writer, const Coord<R, Index>& extents, Index n, bool unit) {
  ++elementwise_counters().rows;
  const Index cols = extents.c[R - 1], rows = n / cols;
#pragma omp parallel if (n >= parallel_threshold)
  {
    // Each thread a run of whole rows, its coordinates stepped like an odometer (a short
    // row of a 3-D stencil cannot afford R - 1 divisions).
    const auto [begin, end] = thread_share(rows);
    Coord<R, Index> c = unravel<R, Index>(begin * cols, extents);
    for (Index row = begin; row < end; ++row) {
      auto in = reader;
      auto out = writer;
      const RebaseTo<R, Index> rebase{row * cols, c};
      for_each_leaf_reader(in, rebase);
      out.data += dot<R, Index>(c, out.strides);
      if (unit) {
#pragma omp simd
        for (Index j = 0; j < cols; ++j) out.linear(j, in.linear(j));
      } else {
#pragma omp simd
        for (Index j = 0; j < cols; ++j) {
          const auto at = row_coordinate<R, Index>(j);
          out.strided(at, in.strided(j, at));
        }
      }
      for (int d = R - 2; d >= 0; --d) {
        if (++c.c[d] < extents.c[d]) break;
        c.c[d] = 0;
      }
    }
  }
}

template <class Index, class T, int R, class D, class E>
void run_loop(const Tensor<T, R, D>& dst, const E& expr, bool linear) {
  std::vector<std::shared_ptr<void>> buffers;
  const auto reader = build_program<Index>(expr, dst.shape(), buffers);
  const auto writer = make_writer<Index>(dst);
  const Index n = static_cast<Index>(dst.numel());
  if (linear) {
    ++elementwise_counters().linear;
#pragma omp parallel if (n >= parallel_threshold)
    {
      // Each thread's own copies: read through the region's shared references, the reader
      // would be reloaded every iteration, and GCC does not vectorize such a loop.
      const auto in = reader;
      const auto out = writer;
#pragma omp for simd schedule(static)
      for (Index i = 0; i < n; ++i) out.linear(i, in.linear(i));
    }
    return;
  }
  if constexpr (R >= 2) {
    RowsReadable<R, Index> unit;
    auto probe = reader;
    for_each_leaf_reader(probe, unit);
    if (unit.ok && writer.strides[R - 1] == 1 && rows_path_enabled().load(std::memory_order_relaxed))
      return run_rows(reader, writer, to_coord<Index>(dst.shape()), n, unit.unit);
  }
  ++elementwise_counters().general;
  for_each_coordinate(n, to_coord<Index>(dst.shape()), [&](Index i, const Coord<R, Index>& c) {
    writer.strided(c, reader.strided(i, c));
  });
}

/// The CPU loops always index with 64 bits (pointer arithmetic is 64-bit on the host
/// anyway): one instantiation per expression rather than two halves its compile time.
using CpuIndex = std::int64_t;

template <class T, int R, class D, class E>  // D: Cpu or Pinned
void run_elementwise(Backend, const Tensor<T, R, D>& dst, const E& expr) {
  run_loop<CpuIndex>(dst, expr, plan_elementwise(dst, expr).linear);
}

/// Runs a fused backward program (eval/tape.hpp) over the index space `shape`: one
/// parallel loop. Only the strided variant is compiled (each thread walks coordinates as
/// run_loop does): a linear variant would double what every recorded expression compiles
/// (autograd is on by default, so every floating-point assignment compiles its backward),
/// and the walk adds one increment per element to a tape sweep that does far more.
template <class Program, std::size_t N>
void run_gradient(Backend, const Program& program, const std::array<std::int64_t, N>& shape, bool /*linear*/) {
  constexpr int R = static_cast<int>(N);
  const CpuIndex n = checked_numel(shape);
  for_each_coordinate(n, to_coord<CpuIndex>(shape),
                      [&](CpuIndex i, const Coord<R, CpuIndex>& c) { program.template run<false>(i, c); });
}

}  // namespace et::detail::cpu_backend
