// Pinned memory and non-blocking copies on a GPU: a copy returns before it is done, and the
// first host access to the pinned side waits for it (the garbage read PyTorch allows cannot
// happen). The device is held back by a host function that sleeps on its stream, so a copy
// that was not waited for would read or leave stale data, and the tests would see it.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "../common/reference.hpp"

namespace {

using Gpu = et::Cuda<0>;

int sleep_ms = 300;
void sleep_on_host(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms)); }

/// Queues a host-side sleep on cuda:0's current stream: work queued after it starts late.
void hold_device() {
  REQUIRE(cudaLaunchHostFunc(et::current_stream(et::cuda<0>).native(), sleep_on_host, nullptr) == cudaSuccess);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("device -> pinned without blocking returns at once; the first host read waits for the copy",
          "[pinned][streams][timing]") {
  constexpr std::int64_t n = 1 << 22;
  const auto x = et::randn<float>(et::cuda<0>, {n}, 11);
  std::vector<float> expected = x.to_vector();
  for (float& v : expected) v *= 3.0f;
  const auto start = std::chrono::steady_clock::now();
  hold_device();
  const et::Tensor<float, 1, Gpu> y = x * 3.0f;  // runs after the sleep
  const et::Tensor<float, 1, et::Pinned> host = y.to(et::pinned, et::non_blocking);
  CHECK(ms_since(start) < sleep_ms / 2.0);  // did not wait
  SECTION("to_vector") { CHECK(host.to_vector() == expected); }
  SECTION("a CPU expression") {
    const et::Tensor<float, 1, et::Cpu> plus = host + 1.0f;
    const auto got = plus.to_vector();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) wrong += got[i] != expected[i] + 1.0f;
    CHECK(wrong == 0);
  }
  SECTION("item and data") {
    CHECK(host.slice(0, 7, 8).item() == expected[7]);
    CHECK(host.data()[n - 1] == expected[n - 1]);
  }
  CHECK(ms_since(start) >= sleep_ms * 0.9);  // the read did wait
}

TEST_CASE("pinned -> device without blocking: host writes to the source wait until it is copied",
          "[pinned][streams][timing]") {
  constexpr std::int64_t n = 1 << 20;
  const auto values = test::random_values<float>(n, 12);
  et::Tensor<float, 1, et::Pinned> source = et::from_vector(et::cpu, values).pin();
  hold_device();
  const auto start = std::chrono::steady_clock::now();
  const et::Tensor<float, 1, Gpu> on_gpu = source.to(et::cuda<0>, et::non_blocking);
  CHECK(ms_since(start) < sleep_ms / 2.0);
  source = -1.0f;  // a host write: waits for the copy that reads `source`
  CHECK(ms_since(start) >= sleep_ms * 0.5);
  CHECK(on_gpu.to_vector() == values);
  CHECK(source.to_vector() == std::vector<float>(n, -1.0f));
}

TEST_CASE("blocking copies through pinned memory, and pinned statistics on a GPU machine", "[pinned]") {
  const et::MemoryStats before = et::memory_stats(et::pinned);
  const auto x = et::randn<double>(et::cuda<0>, {3, 1000, 7}, 13);
  const auto host = x.to(et::pinned);
  CHECK(et::memory_stats(et::pinned).allocated == before.allocated + 21000 * sizeof(double));
  CHECK(host.to_vector() == x.to_vector());
  const auto back = host.to(et::cuda<0>);
  CHECK(back.to_vector() == x.to_vector());
  const auto strided = x.permute({2, 0, 1});  // a non-contiguous view keeps its layout through pinned memory
  CHECK(strided.to(et::pinned, et::non_blocking).to_vector() == strided.to_vector());
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, host.data()) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeHost);  // page-locked, registered with CUDA
}
