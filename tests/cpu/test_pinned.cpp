// et::Pinned as a device: page-locked host memory that computes like the CPU and mixes
// with it. On a machine without a GPU (CI) its blocks are ordinary host memory; the
// non-blocking copies themselves are tested on the GPU (tests/gpu/test_pinned.cu).
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "../common/reference.hpp"

TEST_CASE("Pinned is a host device named cpu:pinned whose expressions evaluate on the CPU", "[pinned]") {
  STATIC_REQUIRE(et::Device<et::Pinned>);
  STATIC_REQUIRE(!et::Pinned::is_cuda);
  CHECK(et::device_name<et::Pinned>.view() == "cpu:pinned");
  CHECK(et::device_name<et::Cpu>.view() == "cpu");
  const auto values = test::random_values<float>(1001, 3);
  const auto c = et::from_vector(et::cpu, values);
  const et::Tensor<float, 1, et::Pinned> p = c.pin();
  CHECK(p.to_vector() == values);
  CHECK(p.storage() != c.storage());
  using Mixed = decltype(p * 2.0f + c);
  STATIC_REQUIRE(std::is_same_v<Mixed::device_type, et::Cpu>);  // the result lives on the CPU
  const et::Tensor<float, 1, et::Cpu> sum = p * 2.0f + c;
  et::Tensor<float, 1, et::Pinned> into_pinned = et::zeros<float>(et::pinned, {1001});
  into_pinned = c - p;  // and a pinned tensor can be written by a CPU expression
  const auto s = sum.to_vector(), d = into_pinned.to_vector();
  for (std::size_t i = 0; i < values.size(); ++i) {
    REQUIRE(s[i] == values[i] * 2.0f + values[i]);
    REQUIRE(d[i] == 0.0f);
  }
  std::vector<double> exact(1);
  for (float v : values) exact[0] += v;
  CHECK(test::close(et::sum(p).item(), exact[0], 1e-5));
  CHECK(et::max(p).item() == et::max(c).item());
  // Copies between the host devices, blocking or not, are plain copies.
  CHECK(p.to(et::cpu).to_vector() == values);
  CHECK(c.to(et::pinned, et::non_blocking).to_vector() == values);
  CHECK(p.to(et::cpu, et::non_blocking).to_vector() == values);
  CHECK(p.clone().to_vector() == values);
  const auto view = p.slice(0, 1, 1001, 10);  // views of pinned memory are pinned
  STATIC_REQUIRE(std::is_same_v<decltype(view)::device_type, et::Pinned>);
  CHECK(view.to_vector()[3] == values[31]);
}

TEST_CASE("matrix products read pinned operands as the CPU's", "[pinned][matmul]") {
  const auto a = et::randn<double>(et::cpu, {17, 9}, 4), b = et::randn<double>(et::cpu, {9, 5}, 5);
  const auto pa = a.pin(), pb = b.pin();
  const et::Tensor<double, 2, et::Cpu> want = et::matmul(a, b);
  const et::Tensor<double, 2, et::Cpu> both = et::matmul(pa, pb);
  const et::Tensor<double, 2, et::Cpu> mixed = et::matmul(pa, b) * 2.0;
  CHECK(both.to_vector() == want.to_vector());
  const auto w = want.to_vector(), m = mixed.to_vector();
  for (std::size_t i = 0; i < w.size(); ++i) REQUIRE(m[i] == 2.0 * w[i]);
}

TEST_CASE("memory_stats(pinned) counts pinned blocks apart from the CPU's", "[pinned][allocator]") {
  const et::MemoryStats pinned_before = et::memory_stats(et::pinned), cpu_before = et::memory_stats(et::cpu);
  {
    const auto p = et::empty<double>(et::pinned, {4096});
    CHECK(et::memory_stats(et::pinned).allocated == pinned_before.allocated + 4096 * sizeof(double));
    CHECK(et::memory_stats(et::pinned).allocations == pinned_before.allocations + 1);
    CHECK(et::memory_stats(et::cpu).allocated == cpu_before.allocated);
  }
  CHECK(et::memory_stats(et::pinned).allocated == pinned_before.allocated);
}

TEST_CASE("streams and events exist for Pinned as for the CPU", "[pinned][streams]") {
  et::Event<et::Pinned> start, stop;
  start.record(et::current_stream(et::pinned));
  const auto x = et::ones<float>(et::pinned, {100});
  stop.record();
  CHECK(et::elapsed_ms(start, stop) >= 0.0f);
  CHECK(et::sum(x).item() == 100.0f);
}
