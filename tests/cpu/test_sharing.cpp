// Shared subexpressions on the CPU: evaluated once per element, correct for any operands.
#include <catch2/catch.hpp>

#include "../common/sharing_cases.hpp"

TEST_CASE("a subexpression used twice per level is computed once (depth 6)", "[expr][sharing]") {
  const std::int64_t n = GENERATE(0, 1, 7, 1000, 65537);
  sharing::check_depth6(et::cpu, n);
}

TEST_CASE("shared subexpressions over transposed and broadcast operands", "[expr][sharing]") {
  sharing::check_depth5_strided(et::cpu, 1, 1);
  sharing::check_depth5_strided(et::cpu, 37, 53);
}

TEST_CASE("equal-typed subexpressions with different operands stay correct", "[expr][sharing]") {
  const std::int64_t n = GENERATE(1, 1000, 40000);
  sharing::check_same_type_different_operands(et::cpu, n);
}

TEST_CASE("uses that need two variants of one binding in one pass stay correct", "[expr][sharing]") {
  const std::int64_t n = GENERATE(1, 3000);
  sharing::check_conflicting_uses(et::cpu, n);
}

TEST_CASE("an expression split into materialized operands gives the fused result", "[expr][sharing]") {
  // Past the kernel-argument limit (32 764 bytes, assign.hpp) an assignment materializes
  // the root's map operands first; no test expression is that large, so run the split
  // directly on the depth-6 form and compare it with the fused evaluation.
  STATIC_REQUIRE(et::detail::fits_one_kernel_v<float, 1, sharing::Depth6>);
  const sharing::Inputs in(4099);
  const auto x = et::from_vector(et::cpu, in.x), a = et::from_vector(et::cpu, in.a), b = et::from_vector(et::cpu, in.b);
  const et::Tensor<float, 1, et::Cpu> fused = sharing::shared_form<6>(x, a, b);
  const auto split = et::empty<float>(et::cpu, {4099});
  et::detail::run_split(split, sharing::shared_form<6>(x, a, b));
  const std::vector<float> fused_values = fused.to_vector();
  // The operands are materialized in their compute type (float): the same bits.
  test::check_all_close(split.to_vector(), std::vector<double>(fused_values.begin(), fused_values.end()), 0.0);
}
