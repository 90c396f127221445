// Randomized differential tests on the GPU (tests/common/random_cases.hpp): fused expressions
// over random shapes, broadcasts, layouts (views made on the device) and element types
// against double precision, mixed element types, chains of views, the indexing
// operations against their definitions and matrix products. test_random_nn.cu has
// convolution, pooling and gradients. gpu-check runs 10^5 cases per family
// (ET_RANDOM_CASES), CI's build none.
#define ET_WITH_CUB 1  // cumsum and sort on the GPU (ops/scan.hpp)
#include "../common/random_cases.hpp"
#include "../common/random_index_cases.hpp"
#include "../common/random_matmul_cases.hpp"
#include "../common/random_promotion_cases.hpp"
#include "../common/random_view_cases.hpp"

TEST_CASE("random fused expressions match double precision on the GPU", "[random][expr]") {
  test::run_elementwise_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random mixes of element types promote and compute as PyTorch's on the GPU", "[random][promotion]") {
  test::run_promotion_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random reductions match double precision on the GPU", "[random][reductions]") {
  test::run_reduction_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random chains of views read and write the right elements on the GPU", "[random][views]") {
  test::run_view_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random gathers, flips, cumsums and sorts match their definitions on the GPU", "[random][index]") {
  test::run_index_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random matrix products match double precision on the GPU", "[random][matmul]") {
  test::run_matmul_family("cuda:0", et::cuda<0>);
}
