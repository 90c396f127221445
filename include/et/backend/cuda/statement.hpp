// How a statement of several outputs (et::assign, ops/statement.hpp) runs on a CUDA device:
// one launch of kernels/et/kernels/statement.cuh on the device's stream, with 32-bit indices
// where every offset fits (else 64-bit ones), the rows launch where the destinations are
// consecutive along the last axis (rows of 64 elements and more) and every operand is read
// consecutively or broadcast there, a scratch block from the caching allocator for the
// reductions' per-block slots, and a ticket from the device's ticket ring (statement_ticket).
// Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/statement.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "et/backend/cuda/elementwise.hpp"
#include "et/eval/statement.hpp"
#include "et/kernels/statement.cuh"

namespace et::detail::cuda_backend {

/// A ticket for a statement's last block to find itself: one of a ring of counters on the
/// device, zeroed once when the ring is made and left at zero by every statement that takes
/// one (its last block resets it), so that no launch needs a memset first (in a captured
/// graph, a replay reuses the ticket captured). Statements queued at once share a ticket
/// only 4096 statements apart.
inline unsigned int* statement_ticket(int device) {
  constexpr unsigned ring = 4096;
  struct Ring {
    unsigned int* tickets = nullptr;
    std::atomic<unsigned> next{0};
  };
  static Ring rings[max_cuda_devices];
  static std::mutex mutex;
  Ring& r = rings[device];
  {
    std::lock_guard lock(mutex);
    if (r.tickets == nullptr) {  // never freed: graphs captured with a ticket may outlive everything
      DeviceGuard guard(device);
      ET_CUDA_CHECK(cudaMalloc(&r.tickets, ring * sizeof(unsigned int)));
      ET_CUDA_CHECK(cudaMemset(r.tickets, 0, ring * sizeof(unsigned int)));
    }
  }
  return r.tickets + r.next.fetch_add(1, std::memory_order_relaxed) % ring;
}

template <int I, std::size_t N, class Elements, class Reductions, class Finals>
void run_statement(Backend<I>, const std::array<std::int64_t, N>& space, const Elements& elements,
                   const Reductions& reductions, const Finals& finals) {
  constexpr int R = static_cast<int>(N);
  const CudaCall call(I, "statement");
  std::int64_t reach = checked_numel(space);
  const auto reach_of = [&](const auto& part) {
    std::apply([&](const auto&... p) {
      ((reach = std::max(reach, max_offset(p.dst->shape(), p.dst->strides()))), ...);
      ((reach = std::max(reach, plan_reads(p.expr.shape(), p.expr).max_index)), ...);
      (note_expression_uses(*p.dst, p.expr), ...);
    }, part);
  };
  reach_of(elements), reach_of(reductions), reach_of(finals);
  const std::int64_t n = checked_numel(space);
  constexpr bool ends = std::tuple_size_v<Reductions> + std::tuple_size_v<Finals> > 0;
  with_index_type(fits_int32_launch(reach), [&](auto index_tag) {
    using Index = decltype(index_tag);
    std::vector<std::shared_ptr<void>> buffers;
    auto program = make_statement_program<Index>(space, elements, reductions, finals, [&](const auto& expr, const auto& shape) {
      return build_program<Index>(expr, shape, whole(shape), call, buffers);
    });
    using SP = decltype(program);
    kernels::StatementGrid<Index> grid;
    bool rows = false;
    if constexpr (R >= 1) rows = n > 0 && space[N - 1] >= kernels::row_run / 2 && program.template rows_readable<R, Index>() &&
                                 rows_path_enabled().load(std::memory_order_relaxed);
    ++(rows ? elementwise_counters().rows : elementwise_counters().general);
    if (rows) {
      grid.cols = static_cast<Index>(space[N - 1]);
      grid.rows = static_cast<Index>(n / space[N - 1]);
      grid.runs = static_cast<Index>((space[N - 1] + kernels::row_run - 1) / kernels::row_run);
      grid.tiles = static_cast<Index>((grid.rows + 7) / 8 * grid.runs);
    } else {
      grid.tiles = static_cast<Index>((n + 256 * kernels::strided_unroll - 1) / (256 * kernels::strided_unroll));
    }
    // Blocks stride over the tiles: enough to fill the GPU several times, few enough that the
    // last block combines few slots.
    const int blocks = static_cast<int>(std::clamp<std::int64_t>(
        grid.tiles, 1, std::int64_t{device_properties(I).multiprocessors} * 8));
    typename SP::Accs* partials = nullptr;
    unsigned int* ticket = nullptr;
    if constexpr (ends) {
      buffers.push_back(allocate_bytes(I, sizeof(typename SP::Accs) * static_cast<std::size_t>(blocks)));
      partials = static_cast<typename SP::Accs*>(buffers.back().get());
      ticket = statement_ticket(I);
    }
    launch<&kernels::statement<SP, R, Index>>(call, blocks, 256, 0, program, to_coord<Index>(space),
                                              static_cast<Index>(n), grid, partials, ticket);
  });
}

}  // namespace et::detail::cuda_backend
