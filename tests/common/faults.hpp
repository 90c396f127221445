// Test helper: sweep an allocation failure over every allocation of a step (issue 16's
// fault injection), on any device. Shared by the CPU and GPU tests.
#pragma once

#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace test {

/// A check that a step's result equals `expected` element for element: the same step on
/// the same input gives the same bits (CPU loops and GPU kernels are deterministic;
/// cuDNN and cuBLASLt run the same plan each time).
template <class Tensor>
auto equals(const Tensor& expected) {
  return [want = expected.to_vector()](const auto& got) { CHECK(got.to_vector() == want); };
}

/// Runs step() with its n-th allocation failing, for n = 1, 2, ..., until a run makes fewer
/// than n allocations. Each failing run must throw et::OutOfMemory and leave the bytes
/// etensor holds on `dev` as they were (nothing leaked by the unwinding), and a run right
/// after it, without failures, must give a result that `check` accepts (nothing left
/// broken). Prints and returns the number of allocations of one step.
template <class D, class Step, class Check>
std::int64_t sweep_allocation_failures(const char* name, D dev, Step step, Check check) {
  constexpr std::int64_t limit = 10000;
  for (std::int64_t n = 1; n <= limit; ++n) {
    const std::size_t before = et::memory_stats(dev).allocated;
    std::optional<decltype(step())> result;
    bool failed = false;
    {
      et::testing::FailAllocation fail(n);
      try {
        result.emplace(step());
      } catch (const et::OutOfMemory& e) {
        CHECK_THAT(e.what(), Catch::Matchers::Contains("failed on purpose"));
      }
      failed = fail.failed();
      CHECK(failed == !result.has_value());
    }
    if (!failed) {
      check(*result);
      std::printf("fault injection: %s: %lld allocation(s), each failed once\n", name, static_cast<long long>(n - 1));
      CHECK(n > 1);  // the step allocates: otherwise the sweep tested nothing
      return n - 1;
    }
    INFO(name << ": allocation " << n << " failed");
    CHECK(et::memory_stats(dev).allocated == before);
    check(step());
  }
  FAIL(std::string(name) + ": more than 10000 allocations");
  return limit;
}

}  // namespace test
