// Fault injection on the CPU: every allocation of a step made to fail in turn
// (et::testing::FailAllocation, tests/common/faults.hpp): each failure is an et::OutOfMemory,
// leaks nothing, and the step right after it gives the right answer.
#include "../common/faults.hpp"
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <array>
#include <cstdint>
#include <vector>

using Catch::Matchers::Contains;

namespace {

template <class T, std::size_t R>
et::Tensor<T, int(R), et::Cpu> random_tensor(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  std::size_t n = 1;
  for (const std::int64_t extent : shape) n *= static_cast<std::size_t>(extent);
  return et::from_vector(et::cpu, test::random_values<T>(n, seed), shape);
}

}  // namespace

TEST_CASE("every allocation of a CPU step can fail: et::OutOfMemory, nothing leaked, the retry works",
          "[faults]") {
  const auto x = random_tensor<float>(std::array<std::int64_t, 2>{64, 48}, 1);
  const auto y = random_tensor<float>(std::array<std::int64_t, 2>{64, 48}, 2);
  const auto w = random_tensor<float>(std::array<std::int64_t, 2>{48, 32}, 3);

  SECTION("a fused assignment with a shared subexpression and a reduction inside") {
    auto step = [&] {
      const auto e = x * y + 1.0f;  // shared: materialized once into a temporary
      return et::eval(e * e - et::sum(x));
    };
    CHECK(test::sweep_allocation_failures("fused assignment", et::cpu, step, test::equals(step())) >= 2);
  }
  SECTION("axis reductions, softmax and logsumexp") {
    auto step = [&] { return et::eval(et::softmax(x, 1) + et::max(x, 0, true) + et::sum(et::logsumexp(y, 1))); };
    CHECK(test::sweep_allocation_failures("reductions", et::cpu, step, test::equals(step())) >= 3);
  }
  SECTION("matrix products: float, and half through float") {
    auto product = [&] { return et::eval(et::relu(et::matmul(x, w) + 1.0f)); };
    CHECK(test::sweep_allocation_failures("matmul float", et::cpu, product, test::equals(product())) >= 1);
    const auto xh = et::eval(et::cast<et::half>(x)), wh = et::eval(et::cast<et::half>(w));
    auto half_product = [&] { return et::eval(et::matmul(xh, wh)); };
    CHECK(test::sweep_allocation_failures("matmul half", et::cpu, half_product, test::equals(half_product())) >= 3);
  }
  SECTION("convolution and pooling") {
    const auto image = random_tensor<float>(std::array<std::int64_t, 4>{2, 3, 9, 8}, 4);
    const auto filter = random_tensor<float>(std::array<std::int64_t, 4>{5, 3, 3, 3}, 5);
    auto step = [&] {
      const auto y = et::conv2d(image, filter, {.padding = {1, 1}});
      return et::max_pool2d(y, {.kernel = {2, 2}});
    };
    CHECK(test::sweep_allocation_failures("conv2d + max_pool2d", et::cpu, step, test::equals(step())) >= 2);
  }
  SECTION("copies: a packed view, and into pinned memory") {
    auto packed = [&] { return x.transpose(0, 1).contiguous(); };
    CHECK(test::sweep_allocation_failures("contiguous", et::cpu, packed, test::equals(packed())) == 1);
    auto pinned = [&] { return x.to(et::pinned); };
    CHECK(test::sweep_allocation_failures("to(pinned)", et::pinned, pinned, test::equals(pinned())) == 1);
  }
}

TEST_CASE("FailAllocation counts from 1, one at a time, and only on its own thread", "[faults]") {
  CHECK_THROWS_WITH(et::testing::FailAllocation(0), Contains("counted from 1"));
  et::testing::FailAllocation fail(2);
  const auto a = et::zeros<float>(et::cpu, {4});
  CHECK(fail.allocations() == 1);
  CHECK_FALSE(fail.failed());
  CHECK_THROWS_WITH(et::testing::FailAllocation(1), Contains("already active"));
  CHECK_THROWS_AS(et::zeros<float>(et::cpu, {4}), et::OutOfMemory);
  CHECK(fail.failed());
  CHECK(et::zeros<float>(et::cpu, {4}).numel() == 4);  // only the chosen one fails
  CHECK(a.numel() == 4);
}
