// Shared subexpressions on the GPU: the same cases as the CPU (tests/common/sharing_cases.hpp),
// plus the launch counts from CUPTI: a DAG is one kernel, and a use of a shared node with
// other operands than its first use costs one materialization kernel before it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "../common/sharing_cases.hpp"
#include "cupti_counter.hpp"

namespace {

bool all_named(const test::Launches& seen, const std::string& part, std::size_t count) {
  return static_cast<std::size_t>(std::count_if(seen.kernel_names.begin(), seen.kernel_names.end(),
                                                [&](const std::string& name) {
                                                  return name.find(part) != std::string::npos;
                                                })) == count;
}

}  // namespace

TEST_CASE("a subexpression used twice per level is computed once on the GPU (depth 6)", "[sharing]") {
  const std::int64_t n = GENERATE(0, 1, 7, 1000, 1000003);
  sharing::check_depth6(et::cuda<0>, n);
}

TEST_CASE("shared subexpressions over transposed and broadcast operands on the GPU", "[sharing]") {
  sharing::check_depth5_strided(et::cuda<0>, 1, 1);
  sharing::check_depth5_strided(et::cuda<0>, 37, 53);
  sharing::check_depth5_strided(et::cuda<0>, 1001, 1003);
}

TEST_CASE("equal-typed subexpressions with different operands stay correct on the GPU", "[sharing]") {
  const std::int64_t n = GENERATE(1, 1000, 1000003);
  sharing::check_same_type_different_operands(et::cuda<0>, n);
}

TEST_CASE("uses that need two variants of one binding in one pass stay correct on the GPU", "[sharing]") {
  const std::int64_t n = GENERATE(1, 1000003);
  sharing::check_conflicting_uses(et::cuda<0>, n);
}

TEST_CASE("the depth-6 shared form is one kernel; differing operands add one kernel per shared node",
          "[sharing][cupti]") {
  const sharing::Inputs in(100003);
  const auto x = et::from_vector(et::cuda<0>, in.x), y = et::from_vector(et::cuda<0>, in.a),
             a = et::from_vector(et::cuda<0>, in.a), b = et::from_vector(et::cuda<0>, in.b);
  {
    test::LaunchCounter counter;
    const et::Tensor<float, 1, et::Cuda<0>> out = sharing::shared_form<6>(x, a, b);
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 1);
    CHECK(all_named(seen, "elementwise_linear", 1));
  }
  {
    test::LaunchCounter counter;
    const et::Tensor<float, 1, et::Cuda<0>> out = sharing::shared_form<4>(x, a, b) + sharing::shared_form<4>(x, a, b);
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 1);
  }
  {
    // The four bound nodes of f(y) (its e1 ... e4) have other operands than those of
    // f(x): ONE pass computes them all and stores f(y), then the fused kernel runs.
    const auto sum = sharing::shared_form<4>(x, a, b) + sharing::shared_form<4>(y, a, b);
    STATIC_REQUIRE(sharing::bound_nodes<decltype(sum)>() == 4);
    test::LaunchCounter counter;
    const et::Tensor<float, 1, et::Cuda<0>> out = sum;
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 2);
    CHECK(all_named(seen, "materialize_binding", 1));
  }
}
