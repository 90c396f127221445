// Inputs that were once silently wrong or undefined behaviour (issue 16's list), each now a
// clear et:: exception, and the valid neighbours of each still working.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("an undefined tensor is an error wherever it is an operand, not an empty tensor", "[errors][undefined]") {
  const et::Tensor<float, 1, et::Cpu> u;
  const auto x = et::ones<float>(et::cpu, {3});
  const std::string undefined = "undefined (default-constructed) tensor";
  CHECK_THROWS_WITH(et::eval(u + 1.0f), Contains(undefined));
  CHECK_THROWS_WITH((et::Tensor<float, 1, et::Cpu>(u * 2.0f)), Contains(undefined));
  CHECK_THROWS_WITH(et::eval(et::where(u > 0.0f, 1.0f, 0.0f)), Contains(undefined));
  CHECK_THROWS_WITH(x + u, Contains(undefined));
  CHECK_THROWS_WITH(et::max(u), Contains(undefined));
  CHECK_THROWS_WITH(et::sum(u), Contains(undefined));
  CHECK_THROWS_WITH(et::sum(u, 0), Contains(undefined));
  et::Tensor<float, 1, et::Cpu> target;
  CHECK_THROWS_WITH(target = 1.0f, Contains("assigning a scalar") && Contains(undefined));
  CHECK_THROWS_WITH(target.copy_(x), Contains("copy_()") && Contains(undefined));
  CHECK_THROWS_WITH(target += 1.0f, Contains(undefined));
  CHECK_FALSE(target.defined());
  target = x * 2.0f;  // an expression gives an undefined tensor its shape: still allowed
  CHECK(target.to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("scalars an integer tensor cannot hold are an error, not undefined behaviour", "[errors][creation]") {
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, 1e10), Contains("full") && Contains("does not fit a 32-bit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, std::nan("")), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, -INFINITY), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, 2147483648.0), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, std::int64_t{1} << 40), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int64_t>(et::cpu, {1}, 9.3e18), Contains("does not fit a 64-bit"));
  CHECK(et::full<std::int32_t>(et::cpu, {1}, 2147483647.0).item() == 2147483647);
  CHECK(et::full<std::int32_t>(et::cpu, {1}, -2147483648.0).item() == -2147483647 - 1);
  CHECK(et::full<std::int32_t>(et::cpu, {1}, 2.9).item() == 2);  // in range: truncates, as C++ does
  CHECK(et::full<bool>(et::cpu, {1}, 1e10).item() == true);
  auto ints = et::zeros<std::int32_t>(et::cpu, {2});
  CHECK_THROWS_WITH(ints = 1e10, Contains("assigning a scalar") && Contains("does not fit"));
  CHECK(ints.to_vector() == std::vector<std::int32_t>{0, 0});  // unchanged
  // arange: every value must fit, and a wild count reads as a number, not 300 digits.
  CHECK_THROWS_WITH(et::arange<std::int32_t>(et::cpu, 0.0, 4e9, 1e9), Contains("arange's last value"));
  CHECK(et::arange<std::int32_t>(et::cpu, 0.0, 3e9, 1e9).to_vector() == std::vector<std::int32_t>{0, 1000000000, 2000000000});
  try {
    (void)et::arange<float>(et::cpu, 0.0, 1e300, 1e-10);
    FAIL("expected et::ShapeError");
  } catch (const et::ShapeError& e) {
    const std::string message = e.what();
    CHECK(message.size() < 160);
    CHECK_THAT(message, Contains("elements"));
  }
}

TEST_CASE("shape arithmetic that would overflow int64 is a ShapeError", "[errors][views]") {
  const auto one = et::ones<float>(et::cpu, {1, 1});
  CHECK_THROWS_WITH(one.expand({std::int64_t{1} << 62, std::int64_t{1} << 62}),
                    Contains("more elements than fit in 64 bits"));
  CHECK(one.expand({std::int64_t{1} << 31, 4}).numel() == (std::int64_t{1} << 33));  // a large view is fine
  CHECK_THROWS_WITH(et::empty<float>(et::cpu, {0, int64_max, 4}), Contains("do not fit in 64 bits"));
  CHECK(et::empty<float>(et::cpu, {0, 5, 4}).strides() == std::array<std::int64_t, 3>{20, 4, 1});
  const auto x = et::ones<float>(et::cpu, {1, 2, 5, 5}), w = et::ones<float>(et::cpu, {3, 2, 3, 3});
  CHECK_THROWS_WITH(et::conv2d(x, w, {.padding = {int64_max / 2, 1}}), Contains("conv2d") && Contains("past 64 bits"));
  CHECK_THROWS_WITH(et::conv2d(x, w, {.dilation = {int64_max / 2 + 1, 1}}), Contains("past 64 bits"));
  CHECK_THROWS_WITH(et::max_pool2d(x, {.kernel = {int64_max, 2}, .padding = {int64_max / 2, 0}}),
                    Contains("past 64 bits"));
  CHECK(et::conv2d(x, w, {.padding = {1, 1}}).shape() == et::Shape<4>{1, 3, 5, 5});
}

TEST_CASE("a reduction's axis error names the operation and the shape", "[errors][reductions]") {
  const auto x = et::ones<float>(et::cpu, {2, 3});
  CHECK_THROWS_WITH(et::sum(x, 2), Contains("et: sum: axis 2 is out of range for shape [2, 3] of rank 2"));
  CHECK_THROWS_WITH(et::max(x, -3), Contains("max") && Contains("[2, 3]") && Contains("axes -2 to 1"));
  CHECK(et::sum(x, -1).to_vector() == std::vector<float>{3, 3});
}
