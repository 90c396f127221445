// Randomized differential tests on the CPU (tests/common/random_cases.hpp): fused expressions
// over random shapes, broadcasts, layouts and element types against double precision,
// mixed element types (random_promotion_cases.hpp), chains of views
// (random_view_cases.hpp), the indexing operations and matrix products
// (random_index_cases.hpp, random_matmul_cases.hpp). Convolution, pooling and gradients
// are in test_random_nn.cpp.
#include "../common/random_cases.hpp"
#include "../common/random_index_cases.hpp"
#include "../common/random_matmul_cases.hpp"
#include "../common/random_promotion_cases.hpp"
#include "../common/random_view_cases.hpp"

TEST_CASE("random fused expressions match double precision on the CPU", "[random][expr]") {
  test::run_elementwise_family("cpu", et::cpu);
}

TEST_CASE("random mixes of element types promote and compute as PyTorch's on the CPU", "[random][promotion]") {
  test::run_promotion_family("cpu", et::cpu);
}

TEST_CASE("random reductions match double precision on the CPU", "[random][reductions]") {
  test::run_reduction_family("cpu", et::cpu);
}

TEST_CASE("random chains of views read and write the right elements on the CPU", "[random][views]") {
  test::run_view_family("cpu", et::cpu);
}

TEST_CASE("random gathers, flips, cumsums and sorts match their definitions on the CPU", "[random][index]") {
  test::run_index_family("cpu", et::cpu);
}

TEST_CASE("random matrix products match double precision on the CPU", "[random][matmul]") {
  test::run_matmul_family("cpu", et::cpu);
}
