// Fault injection on the GPU: every allocation of a step made to fail in turn
// (et::testing::FailAllocation, tests/cpu/faults.hpp): each failure is an et::OutOfMemory,
// leaks nothing from etensor's pool, and the step right after it gives the right answer.
// Each step runs once before its sweep, so that the caches it fills on first use (the
// cuBLASLt workspace of the stream, cuDNN's plans) are in place: the sweep covers the
// allocations of every later call.
#include "../cpu/faults.hpp"
#include "../cpu/reference.hpp"

#include <et/et.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

template <std::size_t R>
et::Tensor<float, int(R), Gpu> random_gpu(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  std::size_t n = 1;
  for (const std::int64_t extent : shape) n *= static_cast<std::size_t>(extent);
  return et::from_vector(et::cpu, test::random_values<float>(n, seed), shape).to(et::cuda<0>);
}

}  // namespace

TEST_CASE("every allocation of a GPU step can fail: et::OutOfMemory, nothing leaked, the retry works",
          "[faults]") {
  const auto x = random_gpu(std::array<std::int64_t, 2>{64, 48}, 1);
  const auto y = random_gpu(std::array<std::int64_t, 2>{64, 48}, 2);
  const auto w = random_gpu(std::array<std::int64_t, 2>{48, 32}, 3);

  SECTION("a fused assignment with a shared subexpression and a reduction inside") {
    auto step = [&] {
      const auto e = et::exp(x) * y + 1.0f;
      return et::eval(e * e - et::sum(x) + e);
    };
    CHECK(test::sweep_allocation_failures("gpu fused assignment", et::cuda<0>, step, test::equals(step())) >= 2);
  }
  SECTION("axis reductions, softmax and logsumexp") {
    auto step = [&] { return et::eval(et::softmax(x, 1) + et::max(x, 0, true) + et::sum(et::logsumexp(y, 1))); };
    CHECK(test::sweep_allocation_failures("gpu reductions", et::cuda<0>, step, test::equals(step())) >= 3);
  }
  SECTION("a matrix product with a fused bias and ReLU") {
    const auto b = random_gpu(std::array<std::int64_t, 1>{32}, 4);
    auto step = [&] { return et::eval(et::relu(et::matmul(x, w) + b)); };
    CHECK(test::sweep_allocation_failures("gpu matmul", et::cuda<0>, step, test::equals(step())) >= 1);
  }
  SECTION("a copy from the host") {
    const auto host = et::from_vector(et::cpu, test::random_values<float>(3000, 7), std::array<std::int64_t, 1>{3000});
    auto step = [&] { return host.to(et::cuda<0>); };
    CHECK(test::sweep_allocation_failures("gpu upload", et::cuda<0>, step, test::equals(step())) == 1);
  }
}

// Apart, and tagged [conv]: compute-sanitizer's initcheck leaves out the [conv] tests (scripts/gpu-check).
TEST_CASE("every allocation of a GPU convolution and pooling can fail the same way", "[faults][conv]") {
  const auto image = random_gpu(std::array<std::int64_t, 4>{2, 3, 9, 8}, 5);
  const auto filter = random_gpu(std::array<std::int64_t, 4>{5, 3, 3, 3}, 6);
  auto step = [&] {
    const auto y = et::conv2d(image, filter, {.padding = {1, 1}, .allow_tf32 = false});
    return et::max_pool2d(y, {.kernel = {2, 2}});
  };
  CHECK(test::sweep_allocation_failures("gpu conv2d + max_pool2d", et::cuda<0>, step, test::equals(step())) >= 2);
}
