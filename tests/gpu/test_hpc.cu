// HPC codes' surfaces on the GPU: the cases of tests/common/stencil_cases.hpp on CUDA (the
// strided kernel's rows launch where rows are 64 elements and longer, its general launch
// otherwise and with the rows path off).
#include "../common/statement_cases.hpp"
#include "../common/stencil_cases.hpp"

#include <catch2/catch.hpp>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: t(...): several axes at once, bounds, gradients", "[hpc][views]") { test::check_indexing<Gpu>(); }
TEST_CASE("GPU: windows: assignment writes; a plain handle rebinds", "[hpc][views]") { test::check_windows<Gpu>(); }
TEST_CASE("GPU: noalias: one kernel straight into the destination, recorded onto it, errors", "[hpc][views]") { test::check_noalias<Gpu>(); }
TEST_CASE("GPU: jacobi-2d over windows against a double loop, rows on and off", "[hpc][stencil]") {
  test::check_jacobi<Gpu>(37, 133, true);
  test::check_jacobi<Gpu>(37, 53, false);  // rows of 51 elements: the general launch
  test::check_jacobi<Gpu>(3, 300, true);
  test::check_jacobi<Gpu>(2, 2, false);
  test::check_jacobi<Gpu>(1000, 1029, true);
}
TEST_CASE("GPU: heat-3d over windows against a double loop, rows on and off", "[hpc][stencil]") {
  test::check_heat<Gpu>(9, 11, 70);
  test::check_heat<Gpu>(5, 4, 300);
  test::check_heat<Gpu>(3, 3, 3);
}
TEST_CASE("GPU: random statements over windows: the rows launch agrees with the general one", "[hpc][stencil]") {
  test::check_rows_against_general<Gpu>();
}
TEST_CASE("GPU: statements: two updates and a reduction in one pass, against doubles", "[hpc][statement]") {
  for (const auto& [n, m] : {std::pair<std::int64_t, std::int64_t>{37, 133}, {1, 1}, {0, 5}, {3, 64}, {300, 7}}) {
    test::check_update_statement<Gpu>(n, m, false);
    test::check_update_statement<Gpu>(n, m, true);
  }
}
TEST_CASE("GPU: statements: finals, reductions alone, max and min, empty spaces", "[hpc][statement]") {
  test::check_statement_forms<Gpu>();
}
TEST_CASE("GPU: statements: reads of other elements, gradients, errors", "[hpc][statement]") {
  test::check_statement_edges<Gpu>();
}
TEST_CASE("GPU: matmul with a vector, and alpha A x + beta y as one GEMM", "[hpc][matmul]") {
  test::check_matvec<Gpu>();
}
TEST_CASE("GPU: floor, ceil, trunc, round, fmod, remainder; index grids", "[hpc][functors]") {
  test::check_rounding_and_grids<Gpu>();
}
TEST_CASE("GPU: matvec_pair: A x and A^T y reading A once, layouts, types, gradients, errors", "[hpc][matmul]") { test::check_matvec_pair<Gpu>(); }
