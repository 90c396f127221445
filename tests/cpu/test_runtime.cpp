// Run-time device queries and run-time -> compile-time dispatch, as seen from a plain
// C++ file (the CI machine has no GPU; on a GPU machine these still hold).
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cstdint>
#include <string>

using Catch::Matchers::Contains;

TEST_CASE("device queries agree with each other", "[runtime]") {
  CHECK(et::cuda_available() == (et::device_count() > 0));
  CHECK(et::device_count() >= 0);
  et::synchronize(et::cpu);
  if (et::device_count() == 0) {
#if defined(ET_HAS_CUDA_RUNTIME)
    CHECK_THROWS_WITH(et::device_properties(0), Contains("cuda:0 was requested") && Contains("sees 0 CUDA device(s)"));
#else
    CHECK_THROWS_WITH(et::device_properties(0), Contains("cuda:0 was requested") && Contains("built without CUDA"));
#endif
    CHECK_THROWS_AS(et::synchronize(et::cuda<0>), et::Error);
    CHECK_THROWS_AS(et::memory_info(et::cuda<0>), et::Error);
  } else {
    const auto& p = et::device_properties(0);
    CHECK_FALSE(p.name.empty());
    CHECK(p.total_memory > 0);
    CHECK(p.multiprocessors > 0);
    CHECK(&et::device_properties(et::cuda<0>) == &p);  // cached
  }
  CHECK_THROWS_AS(et::device_properties(-1), et::Error);
}

TEST_CASE("try_gpu in a file nvcc does not compile takes the CPU, whatever GPUs exist", "[runtime]") {
  const std::string chosen = et::try_gpu([](auto dev) {
    // The same generic code, typed for the device that was found.
    const auto x = et::zeros<float>(dev, {3});
    static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(x)>::device_type, decltype(dev)>);
    return std::string(et::device_name<decltype(dev)>);
  });
  // Only the CPU branch is compiled here: a GPU branch could run no kernel in a plain C++
  // file. (Under nvcc the GPU branch is taken: the examples run on cuda:0 in gpu-check.)
  CHECK(chosen == "cpu");
}

TEST_CASE("with_device maps an index or a name to a device type", "[runtime]") {
  auto name_of = [](auto dev) { return std::string(et::device_name<decltype(dev)>); };
  CHECK(et::with_device(-1, name_of) == "cpu");
  CHECK(et::with_device("cpu", name_of) == "cpu");
  if (et::device_count() >= 2) {
    CHECK(et::with_device<2>("cuda:1", name_of) == "cuda:1");
  } else {
    CHECK_THROWS_WITH(et::with_device<2>("cuda:1", name_of), Contains("cuda:1 was requested"));
  }
#if defined(ET_HAS_CUDA_RUNTIME)
  CHECK_THROWS_WITH(et::with_device<2>(2, name_of), Contains("past the 2 CUDA device(s) this call was compiled for"));
#else
  CHECK_THROWS_WITH(et::with_device<2>(2, name_of), Contains("built without CUDA"));
#endif
  CHECK_THROWS_WITH(et::with_device("gpu", name_of), Contains("cannot read a device from \"gpu\""));
  CHECK_THROWS_WITH(et::with_device("cuda:x", name_of), Contains("cannot read a device"));
  CHECK_THROWS_WITH(et::with_device("cuda:-1", name_of), Contains("cannot read a device"));
}

TEST_CASE("errors are et::Error subclasses that say what happened", "[runtime]") {
  const et::OutOfMemory oom("cuda:0", std::size_t{3} << 30, std::size_t{1} << 30, std::size_t{80} << 30);
  CHECK(std::string(oom.what()) ==
        "et: out of memory on cuda:0: tried to allocate 3.00 GiB (3221225472 bytes); 1.00 GiB (1073741824 bytes) free "
        "of 80.00 GiB (85899345920 bytes) total (cached blocks were released and the allocation retried once)");
  const et::Error& as_base = oom;
  CHECK_THAT(std::string(as_base.what()), Contains("et:"));
  CHECK(et::OutOfMemory::format_bytes(512) == "512.00 B (512 bytes)");
}

TEST_CASE("streams and events compile for the CPU too: synchronous work, host time", "[runtime][streams]") {
  const auto s = et::Stream<et::Cpu>::create();
  CHECK(et::current_stream(et::cpu) == s);
  et::Event<et::Cpu> start, stop;
  {
    et::StreamGuard guard(s);
    start.record(s);
    const auto x = et::randn<double>(et::cpu, {1 << 16}, 1);
    CHECK(et::sum(x * x).item() > 0);
    stop.record();
  }
  s.synchronize();
  s.wait(stop);
  stop.synchronize();
  CHECK(stop.query());
  CHECK(et::elapsed_ms(start, stop) >= 0.0f);
  CHECK(et::elapsed_ms(start, stop) < 60e3f);
}

TEST_CASE("memory_stats(cpu) counts the bytes and blocks etensor holds on the host", "[runtime][allocator]") {
  et::empty_cache(et::cpu);  // what earlier tests left cached
  const et::MemoryStats before = et::memory_stats(et::cpu);
  constexpr std::int64_t n = 1 << 18;
  {
    const auto x = et::empty<float>(et::cpu, {n});
    const et::MemoryStats held = et::memory_stats(et::cpu);
    CHECK(held.allocated == before.allocated + n * sizeof(float));
    CHECK(held.reserved == held.allocated);
    CHECK(held.allocations == before.allocations + 1);
    CHECK(held.total_allocations == before.total_allocations + 1);
    CHECK(held.peak_allocated >= held.allocated);
    CHECK(x.slice(0, 0, 10).numel() == 10);  // a view allocates nothing
    CHECK(et::memory_stats(et::cpu).allocations == held.allocations);
  }
  const et::MemoryStats after = et::memory_stats(et::cpu);
  CHECK(after.allocated == before.allocated);
  CHECK(after.allocations == before.allocations);
  CHECK(after.peak_allocated >= before.allocated + n * sizeof(float));
  et::reset_peak_memory_stats(et::cpu);
  CHECK(et::memory_stats(et::cpu).peak_allocated == after.allocated);
  et::empty_cache(et::cpu);
  CHECK(et::memory_stats(et::cpu).allocated == after.allocated);
  CHECK(et::memory_stats(et::cpu).reserved == after.allocated);  // the 1 MiB block's cache handed back
}

TEST_CASE("memory_stats(cpu): freed blocks of 256 KiB and more are cached for their size; empty_cache hands them back",
          "[runtime][allocator]") {
  et::empty_cache(et::cpu);
  const et::MemoryStats before = et::memory_stats(et::cpu);
  CHECK(before.reserved == before.allocated);
  constexpr std::int64_t n = (5 << 20) / 4 + 3;  // 5 MiB and 12 bytes: a block of 6 MiB
  constexpr std::size_t block = 6 << 20;
  const float* first = nullptr;
  {
    auto x = et::full<float>(et::cpu, {n}, 1.5f);
    first = x.data();
    CHECK(et::memory_stats(et::cpu).allocated == before.allocated + n * sizeof(float));
  }
  et::MemoryStats freed = et::memory_stats(et::cpu);
  CHECK(freed.allocated == before.allocated);
  CHECK(freed.reserved == before.reserved + block);
  {
    // The same rounded size takes the cached block back; its contents are not kept.
    const auto y = et::full<float>(et::cpu, {n - 100}, 2.0f);
    CHECK(y.data() == first);
    CHECK(et::memory_stats(et::cpu).reserved == before.reserved + (n - 100) * sizeof(float));  // nothing cached now
    CHECK(et::sum(y).item() == 2.0f * float(n - 100));
    // Another size does not.
    const auto z = et::full<float>(et::cpu, {3 * n}, 3.0f);
    CHECK(z.data() != first);
  }
  CHECK(et::memory_stats(et::cpu).reserved > before.reserved + block);
  et::empty_cache(et::cpu);
  CHECK(et::memory_stats(et::cpu).reserved == before.allocated);
}
