// How a statement of several outputs (et::assign, ops/statement.hpp) runs on the CPU: one
// parallel loop over its index space, row by row where every operand and destination is
// consecutive along the last axis (the row loop of elementwise.hpp), else coordinate by
// coordinate; each thread accumulates the reductions of its share pairwise (blocks of 64
// elements, as reduce.hpp), the shares are combined in thread order (the same input and
// thread count give the same bits), and the end of the pass (reductions' results, finals)
// is computed once after the loop.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "et/backend/cpu/elementwise.hpp"
#include "et/backend/cpu/reduce.hpp"
#include "et/eval/statement.hpp"

namespace et::detail::cpu_backend {

/// A statement's accumulators (all its reductions at once) as one reduction operator, for
/// PairwiseAccumulator.
template <class SP>
struct StatementOps {
  using acc_type = typename SP::Accs;
  static acc_type identity() { return SP::identities(); }
  static acc_type combine(acc_type a, const acc_type& b) {
    SP::combine(a, b);
    return a;
  }
};

template <std::size_t N, class Elements, class Reductions, class Finals>
void run_statement(Backend, const std::array<std::int64_t, N>& space, const Elements& elements,
                   const Reductions& reductions, const Finals& finals) {
  constexpr int R = static_cast<int>(N);
  using Index = CpuIndex;
  std::vector<std::shared_ptr<void>> buffers;
  auto program = make_statement_program<Index>(space, elements, reductions, finals, [&](const auto& expr, const auto& shape) {
    return build_program<Index>(expr, shape, buffers);
  });
  using SP = decltype(program);
  using Accs = typename SP::Accs;
  constexpr Index block = 64;  // elements accumulated in order before the pairwise sum takes them
  const Index n = checked_numel(space);
  const auto extents = to_coord<Index>(space);
  bool rows = false;
  if constexpr (R >= 1) rows = n > 0 && program.template rows_readable<R, Index>() && rows_path_enabled().load();
  ++(rows ? elementwise_counters().rows : elementwise_counters().general);
  const Index cols = R >= 1 && n > 0 ? extents.c[R - 1] : 1;
  const Index units = rows ? n / cols : n;  // rows, or elements
  int threads = 1;
#if defined(_OPENMP)
  if (n >= parallel_threshold) threads = omp_get_max_threads();
#endif
  std::vector<Accs> partial(static_cast<std::size_t>(threads), SP::identities());
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int thread = 0, team = 1;
#if defined(_OPENMP)
    thread = omp_get_thread_num();
    team = omp_get_num_threads();
#endif
    const Index chunk = (units + team - 1) / team;
    const Index begin = std::min<Index>(units, chunk * thread), end = std::min<Index>(units, begin + chunk);
    PairwiseAccumulator<StatementOps<SP>> total;
    if (rows) {
      for (Index row = begin; row < end; ++row) {
        Coord<R, Index> c{};
        if constexpr (R >= 2) {
          Index rest = row;
          for (int d = R - 2; d > 0; --d) {
            c.c[d] = rest % extents.c[d];
            rest /= extents.c[d];
          }
          c.c[0] = rest;
        }
        auto local = program;
        local.rebase(RebaseTo<R, Index>{row * cols, c});
        for (Index j0 = 0; j0 < cols; j0 += block) {
          Accs accs = SP::identities();
          for (Index j = j0; j < std::min(cols, j0 + block); ++j)
            local.template store_row<R>(j, local.template values_row<R>(j, accs, static_cast<std::int64_t>(row * cols + j)));
          total.add(accs);
        }
      }
    } else {
      for (Index i0 = begin; i0 < end; i0 += block) {
        Accs accs = SP::identities();
        for (Index i = i0; i < std::min(end, i0 + block); ++i) {
          const auto c = unravel<R, Index>(i, extents);
          program.store_strided(c, program.values_strided(i, c, accs, static_cast<std::int64_t>(i)));
        }
        total.add(accs);
      }
    }
    partial[static_cast<std::size_t>(thread)] = total.result();
  }
  Accs totals = SP::identities();
  for (const Accs& share : partial) SP::combine(totals, share);
  program.template finish<Index>(totals, static_cast<std::int64_t>(n));
}

}  // namespace et::detail::cpu_backend
