// Randomized differential tests on the GPU (tests/cpu/random_cases.hpp): fused expressions
// over random shapes, broadcasts, layouts (views made on the device) and element types
// against double precision. gpu-check runs 10^5 cases (ET_RANDOM_CASES), CI's build none.
#include "../cpu/random_cases.hpp"

TEST_CASE("random fused expressions match double precision on the GPU", "[random][expr]") {
  test::run_elementwise_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random reductions match double precision on the GPU", "[random][reductions]") {
  test::run_reduction_family("cuda:0", et::cuda<0>);
}
