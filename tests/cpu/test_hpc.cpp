// HPC codes' surfaces on the CPU: several axes at once, windows, stencils over shifted views
// on the row loop and the coordinate walk (the cases are shared with the GPU tests:
// tests/common/stencil_cases.hpp).
#include "../common/statement_cases.hpp"
#include "../common/stencil_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("t(...): several axes at once, bounds, gradients (CPU)", "[hpc][views]") { test::check_indexing<et::Cpu>(); }
TEST_CASE("windows: assignment writes; a plain handle rebinds (CPU)", "[hpc][views]") { test::check_windows<et::Cpu>(); }
TEST_CASE("noalias: one kernel straight into the destination, recorded onto it, errors (CPU)", "[hpc][views]") {
  test::check_noalias<et::Cpu>();
}
TEST_CASE("jacobi-2d over windows against a double loop, rows on and off (CPU)", "[hpc][stencil]") {
  for (const auto& [n, m] : {std::pair{37, 53}, {3, 3}, {2, 9}, {2, 2}, {130, 7}}) test::check_jacobi<et::Cpu>(n, m, true);
}
TEST_CASE("heat-3d over windows against a double loop, rows on and off (CPU)", "[hpc][stencil]") {
  test::check_heat<et::Cpu>(9, 11, 70);
  test::check_heat<et::Cpu>(3, 3, 3);
}
TEST_CASE("random statements over windows: the row loop agrees with the coordinate walk (CPU)", "[hpc][stencil]") {
  test::check_rows_against_general<et::Cpu>();
}
TEST_CASE("statements: two updates and a reduction in one pass, against doubles (CPU)", "[hpc][statement]") {
  for (const auto& [n, m] : {std::pair<std::int64_t, std::int64_t>{37, 133}, {1, 1}, {0, 5}, {3, 64}, {300, 7}}) {
    test::check_update_statement<et::Cpu>(n, m, false);
    test::check_update_statement<et::Cpu>(n, m, true);
  }
}
TEST_CASE("statements: finals, reductions alone, max and min, empty spaces (CPU)", "[hpc][statement]") {
  test::check_statement_forms<et::Cpu>();
}
TEST_CASE("statements: reads of other elements, gradients, errors (CPU)", "[hpc][statement]") {
  test::check_statement_edges<et::Cpu>();
}
TEST_CASE("matmul with a vector, and alpha A x + beta y as one GEMM (CPU)", "[hpc][matmul]") {
  test::check_matvec<et::Cpu>();
}
TEST_CASE("floor, ceil, trunc, round, fmod, remainder; index grids (CPU)", "[hpc][functors]") {
  test::check_rounding_and_grids<et::Cpu>();
}
TEST_CASE("matvec_pair: A x and A^T y reading A once, layouts, types, gradients, errors (CPU)", "[hpc][matmul]") { test::check_matvec_pair<et::Cpu>(); }
