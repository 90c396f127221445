// Randomized differential tests on the CPU (tests/cpu/random_cases.hpp): fused expressions
// over random shapes, broadcasts, layouts and element types against double precision.
#include "random_cases.hpp"

TEST_CASE("random fused expressions match double precision on the CPU", "[random][expr]") {
  test::run_elementwise_family("cpu", et::cpu);
}

TEST_CASE("random reductions match double precision on the CPU", "[random][reductions]") {
  test::run_reduction_family("cpu", et::cpu);
}
