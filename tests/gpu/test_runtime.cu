// The GPU run time: device queries, copies across devices, storage sharing, the
// counter-based random numbers (bit-identical on CPU and GPU), element access, and the
// errors: a missing device, out of memory, a failing CUDA call. The failure tests run
// last in this file (and this file after test_elementwise.cu), so that if a driver ever
// turned one of them into a sticky error, only the tests after it could be affected.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/random_values.hpp"

namespace {

using Gpu = et::Cuda<0>;
using Catch::Matchers::Contains;

/// Bitwise equality of two element sequences (NaN payloads and signed zeros included).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

std::size_t elements(const std::array<std::int64_t, 2>& shape) {
  return static_cast<std::size_t>(shape[0] * shape[1]);
}

}  // namespace

TEST_CASE("device queries agree with the CUDA runtime", "[runtime]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(et::device_count() == count);
  CHECK(et::cuda_available() == (count > 0));
  for (int i = 0; i < count; ++i) {
    CAPTURE(i);
    cudaDeviceProp expected{};
    REQUIRE(cudaGetDeviceProperties(&expected, i) == cudaSuccess);
    const et::DeviceProperties& got = et::device_properties(i);
    CHECK(got.name == std::string(expected.name));
    CHECK(got.total_memory == expected.totalGlobalMem);
    CHECK(got.multiprocessors == expected.multiProcessorCount);
    CHECK(got.compute_major == expected.major);
    CHECK(got.compute_minor == expected.minor);
    CHECK(got.l2_cache_bytes == static_cast<std::size_t>(expected.l2CacheSize));
  }
  CHECK(&et::device_properties(et::cuda<0>) == &et::device_properties(0));  // cached, one entry per device
  CHECK_THROWS_AS(et::device_properties(count), et::Error);

  const et::MemoryInfo memory = et::memory_info(et::cuda<0>);
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  CHECK(memory.total == total);
  CHECK(memory.free > 0);
  CHECK(memory.free <= memory.total);
  CHECK(memory.total <= et::device_properties(0).total_memory);
}

TEST_CASE("synchronize waits for the work queued on the device", "[runtime]") {
  const std::int64_t n = std::int64_t{1} << 26;
  const auto x = et::randn<float>(et::cuda<0>, {n}, 11);
  et::synchronize(et::cuda<0>);
  REQUIRE(et::current_stream(et::cuda<0>).query());
  // A quarter-gigabyte transcendental chain keeps the GPU busy for a while after the
  // launch returns; only synchronize makes the stream idle.
  const et::Tensor<float, 1, Gpu> y = et::tanh(x) * et::exp(-et::abs(x)) + et::sqrt(et::square(x) + 1.0f);
  et::synchronize(et::cuda<0>);
  CHECK(et::current_stream(et::cuda<0>).query());
  CHECK(cudaStreamQuery(cudaStreamLegacy) == cudaSuccess);
  et::synchronize(et::cpu);  // the CPU evaluates synchronously: a no-op that must compile and return
  CHECK(y.numel() == n);
}

TEMPLATE_TEST_CASE("to() round-trips cpu -> cuda:0 -> cpu for every element type", "[runtime][copy]", float, double,
                   std::int32_t, std::int64_t, bool) {
  using T = TestType;
  const auto shape = GENERATE(values<std::array<std::int64_t, 2>>({{0, 3}, {3, 0}, {1, 1}, {1, 7}, {17, 33}, {1001, 999}}));
  CAPTURE(shape[0], shape[1]);
  const std::vector<T> host = test::random_values<T>(elements(shape), 100 + elements(shape), test::wide);
  const auto on_cpu = et::from_vector(et::cpu, host, shape);
  const et::Tensor<T, 2, Gpu> on_gpu = on_cpu.to(et::cuda<0>);
  const et::Tensor<T, 2, et::Cpu> back = on_gpu.to(et::cpu);
  CHECK(on_gpu.shape() == shape);
  CHECK(back.shape() == shape);
  CHECK(on_gpu.numel() == static_cast<std::int64_t>(host.size()));
  CHECK(back.to_vector() == host);
  CHECK(on_gpu.to_vector() == host);  // straight from the device
  CHECK(et::to<et::Cpu>(et::to<Gpu>(on_cpu)).to_vector() == host);
  if (!host.empty()) CHECK(back.storage() != on_cpu.storage());
}

TEST_CASE("to() of a non-contiguous view keeps its layout and values", "[runtime][copy]") {
  const std::int64_t rows = 37, cols = 53;
  const std::vector<double> host = test::random_values<double>(static_cast<std::size_t>(rows * cols), 200, test::wide);
  const auto base = et::from_vector(et::cuda<0>, host, {rows, cols});
  // Its transpose [cols, rows] and its row 5 with every second element, both views of base.
  const et::Tensor<double, 2, Gpu> transposed(base.storage(), 0, {cols, rows}, {1, cols});
  const et::Tensor<double, 1, Gpu> strided_row(base.storage(), 5 * cols, {(cols + 1) / 2}, {2});
  std::vector<double> expected_transposed, expected_row;
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t r = 0; r < rows; ++r) expected_transposed.push_back(host[static_cast<std::size_t>(r * cols + c)]);
  for (std::int64_t c = 0; c < cols; c += 2) expected_row.push_back(host[static_cast<std::size_t>(5 * cols + c)]);
  CHECK(transposed.to_vector() == expected_transposed);
  CHECK(transposed.to(et::cpu).to_vector() == expected_transposed);
  CHECK(transposed.to(et::cpu).strides() == transposed.strides());
  CHECK(strided_row.to_vector() == expected_row);
  CHECK(strided_row.to(et::cpu).to_vector() == expected_row);
}

TEST_CASE("to() the same device shares storage; clone() deep-copies", "[runtime][copy]") {
  const std::vector<float> host = test::random_values<float>(1000, 300, test::wide);
  const auto x = et::from_vector(et::cuda<0>, host);
  const auto same = x.to(et::cuda<0>);
  CHECK(same.storage() == x.storage());
  CHECK(same.data() == x.data());

  auto copy = x.clone();
  CHECK(copy.storage() != x.storage());
  CHECK(copy.data() != x.data());
  CHECK(copy.to_vector() == host);
  auto alias = x;  // a handle copy aliases
  alias = 5.0f;    // fills the shared storage
  CHECK(x.to_vector() == std::vector<float>(1000, 5.0f));
  CHECK(copy.to_vector() == host);  // the clone kept the old values
  copy = -1.0f;
  CHECK(x.to_vector() == std::vector<float>(1000, 5.0f));

  // A clone of a strided view is a deep copy with the same elements.
  const et::Tensor<float, 1, Gpu> every_third(x.storage(), 1, {333}, {3});
  const auto cloned_view = every_third.clone();
  CHECK(cloned_view.storage() != x.storage());
  alias = 2.0f;
  CHECK(cloned_view.to_vector() == std::vector<float>(333, 5.0f));
}

TEST_CASE("peer copies cuda:0 -> cuda:1", "[runtime][copy][multi-gpu]") {
  REQUIRE(et::device_count() >= 2);  // scripts/gpu-check runs [multi-gpu] only where it sees two GPUs
  const std::vector<float> host = test::random_values<float>(100003, 400, test::wide);
  const auto x = et::from_vector(et::cuda<0>, host);
  const et::Tensor<float, 1, et::Cuda<1>> on_one = x.to(et::cuda<1>);
  CHECK(on_one.to_vector() == host);
  const et::Tensor<float, 1, et::Cuda<1>> doubled = on_one * 2;  // a kernel on device 1
  const auto back = doubled.to(et::cuda<0>);
  std::vector<float> expected(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) expected[i] = host[i] * 2;
  CHECK(back.to_vector() == expected);
  CHECK(doubled.to(et::cpu).to_vector() == expected);
}

TEMPLATE_TEST_CASE("rand and randn are bit-identical on the CPU and the GPU", "[runtime][random]", float, double) {
  using T = TestType;
  const std::uint64_t seed = GENERATE(std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{42}, std::uint64_t{0x9E3779B97F4A7C15});
  CAPTURE(seed);
  SECTION("rank 1, sizes around the vector width") {
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, std::int64_t{1000},
                                 (std::int64_t{1} << 20) + 3}) {
      CAPTURE(n);
      CHECK(same_bits(et::rand<T>(et::cuda<0>, {n}, seed).to_vector(), et::rand<T>(et::cpu, {n}, seed).to_vector()));
      CHECK(same_bits(et::randn<T>(et::cuda<0>, {n}, seed).to_vector(), et::randn<T>(et::cpu, {n}, seed).to_vector()));
    }
  }
  SECTION("ranks 2 and 3") {
    CHECK(same_bits(et::rand<T>(et::cuda<0>, {3, 1001}, seed).to_vector(), et::rand<T>(et::cpu, {3, 1001}, seed).to_vector()));
    CHECK(same_bits(et::randn<T>(et::cuda<0>, {5, 7, 129}, seed).to_vector(),
                    et::randn<T>(et::cpu, {5, 7, 129}, seed).to_vector()));
  }
  SECTION("the seed matters and element i depends only on (seed, i)") {
    const auto a = et::randn<T>(et::cuda<0>, {4096}, seed).to_vector();
    const auto b = et::randn<T>(et::cuda<0>, {4096}, seed + 1).to_vector();
    CHECK_FALSE(same_bits(a, b));
    const auto longer = et::randn<T>(et::cuda<0>, {8192}, seed).to_vector();
    CHECK(same_bits(a, std::vector<T>(longer.begin(), longer.begin() + 4096)));
  }
}

TEMPLATE_TEST_CASE("rand and randn have the right moments", "[runtime][random]", float, double) {
  using T = TestType;
  const std::int64_t n = std::int64_t{1} << 22;
  // Bounds are 6 standard errors wide: a correct generator fails about once in 10^8 runs.
  const double samples = static_cast<double>(n);
  SECTION("randn: mean 0, variance 1, 68.27% within one sigma") {
    const std::vector<T> v = et::randn<T>(et::cuda<0>, {n}, 2024).to_vector();
    double sum = 0, sum_squares = 0;
    std::int64_t within_one = 0, non_finite = 0;
    for (const T x : v) {
      non_finite += !std::isfinite(x);
      sum += x;
      sum_squares += double(x) * x;
      within_one += std::fabs(x) < 1;
    }
    const double mean = sum / samples, variance = sum_squares / samples - mean * mean;
    const double fraction = static_cast<double>(within_one) / samples, p = 0.682689492137;
    CAPTURE(mean, variance, fraction);
    REQUIRE(non_finite == 0);
    CHECK(std::fabs(mean) < 6 / std::sqrt(samples));
    CHECK(std::fabs(variance - 1) < 6 * std::sqrt(2 / samples));
    CHECK(std::fabs(fraction - p) < 6 * std::sqrt(p * (1 - p) / samples));
  }
  SECTION("rand: in [0, 1), mean 1/2, variance 1/12") {
    const std::vector<T> v = et::rand<T>(et::cuda<0>, {n}, 2025).to_vector();
    double sum = 0, sum_squares = 0;
    std::int64_t outside = 0;
    for (const T x : v) {
      outside += !(x >= 0 && x < 1);
      sum += x;
      sum_squares += double(x) * x;
    }
    const double mean = sum / samples, variance = sum_squares / samples - mean * mean;
    CAPTURE(mean, variance);
    REQUIRE(outside == 0);
    CHECK(std::fabs(mean - 0.5) < 6 * std::sqrt(1.0 / 12 / samples));
    // The sample variance of n uniforms has variance (mu4 - sigma^4) / n = (1/80 - 1/144) / n = 1/(180 n).
    CHECK(std::fabs(variance - 1.0 / 12) < 6 * std::sqrt(1.0 / 180 / samples));
  }
}

TEST_CASE("item() and to_vector()", "[runtime]") {
  const auto scalar = et::full<double>(et::cuda<0>, et::Shape<0>{}, 3.25);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.item() == 3.25);
  CHECK(et::full<std::int64_t>(et::cuda<0>, {1, 1}, -42).item() == -42);
  CHECK(et::full<bool>(et::cuda<0>, {1}, true).item() == true);

  const std::vector<std::int32_t> host = test::random_values<std::int32_t>(12, 500, test::wide);
  const auto x = et::from_vector(et::cuda<0>, host, {3, 4});
  CHECK(x.to_vector() == host);
  CHECK_THROWS_AS(x.item(), et::ShapeError);
  CHECK_THROWS_WITH(x.item(), Contains("[3, 4]"));
  // Element (2, 1) through a one-element view of the same storage.
  CHECK(et::Tensor<std::int32_t, 0, Gpu>(x.storage(), 2 * 4 + 1, {}, {}).item() == host[9]);
  CHECK(et::Tensor<std::int32_t, 1, Gpu>(x.storage(), 11, {1}, {1}).item() == host[11]);
  const et::Tensor<float, 1, Gpu> undefined;
  CHECK_THROWS_AS(undefined.item(), et::Error);
}

TEST_CASE("a CUDA device past device_count() is an et::Error naming it", "[runtime][errors]") {
  const int count = et::device_count();
  REQUIRE(count < 63);  // cuda:63 is the last index etensor supports; no machine has that many GPUs
  const std::string sees = "sees " + std::to_string(count) + " CUDA device";
  CHECK_THROWS_WITH(et::zeros<float>(et::cuda<63>, {4}), Contains("cuda:63") && Contains(sees));
  CHECK_THROWS_AS(et::empty<double>(et::cuda<63>, {4}), et::Error);
  const auto x = et::ones<float>(et::cuda<0>, {4});
  CHECK_THROWS_WITH(x.to(et::cuda<63>), Contains("cuda:63") && Contains(sees));
  CHECK_THROWS_WITH(et::memory_info(et::cuda<63>), Contains("cuda:63"));
  CHECK_THROWS_WITH(et::synchronize(et::cuda<63>), Contains("cuda:63"));
  CHECK_THROWS_WITH(et::device_properties(63), Contains("cuda:63"));
  CHECK(x.to_vector() == std::vector<float>(4, 1.0f));  // and device 0 still works
}

TEST_CASE("allocating more than the device holds throws et::OutOfMemory, and the process goes on",
          "[runtime][errors][oom]") {
  const et::MemoryInfo before = et::memory_info(et::cuda<0>);
  const std::size_t requested = before.total + (std::size_t{1} << 30);
  const auto floats = static_cast<std::int64_t>(requested / sizeof(float));
  const std::size_t requested_bytes = static_cast<std::size_t>(floats) * sizeof(float);
  CAPTURE(before.free, before.total, requested_bytes);
  bool thrown = false;
  try {
    [[maybe_unused]] const auto too_big = et::empty<float>(et::cuda<0>, {floats});
    FAIL("allocated " << requested_bytes << " bytes on a device of " << before.total);
  } catch (const et::OutOfMemory& e) {
    thrown = true;
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(e.requested_bytes() == requested_bytes);
    CHECK(e.total_bytes() == before.total);
    CHECK(e.free_bytes() <= e.total_bytes());
    CHECK_THAT(message, Contains("cuda:0") && Contains(std::to_string(requested_bytes) + " bytes") &&
                            Contains(std::to_string(e.free_bytes()) + " bytes") &&
                            Contains(std::to_string(e.total_bytes()) + " bytes") && Contains("free") &&
                            Contains("total") && Contains("etensor holds") && Contains("in tensors; its cache of"));
    const et::Error& as_base = e;  // OutOfMemory is an et::Error
    CHECK_THAT(std::string(as_base.what()), Contains("et: out of memory"));
  }
  CHECK(thrown);
  CHECK(cudaGetLastError() == cudaSuccess);

  const std::vector<float> host = test::random_values<float>(1 << 20, 600, test::wide);
  const auto x = et::from_vector(et::cuda<0>, host);
  const et::Tensor<float, 1, Gpu> y = x * 2 + 1;
  std::vector<float> expected(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) expected[i] = host[i] * 2 + 1;
  const std::vector<float> got = y.to_vector();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < host.size(); ++i)
    mismatches += std::fabs(double(got[i]) - expected[i]) > 1e-6 * (1 + std::fabs(double(expected[i])));
  CHECK(mismatches == 0);
}

TEST_CASE("a failing CUDA call surfaces as et::CudaError with the call and file:line", "[runtime][errors][cuda-error]") {
  SECTION("ET_CUDA_CHECK on an invalid device") {
    const int line = __LINE__ + 2;
    try {
      ET_CUDA_CHECK(cudaSetDevice(et::device_count()));
      FAIL("cudaSetDevice(device_count()) succeeded");
    } catch (const et::CudaError& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(e.code() == static_cast<int>(cudaErrorInvalidDevice));
      CHECK_THAT(message, Contains("cudaSetDevice(et::device_count())") && Contains("cudaErrorInvalidDevice") &&
                              Contains("test_runtime.cu:" + std::to_string(line)));
    }
  }
  SECTION("a copy to a null device pointer inside etensor") {
    const std::vector<float> host(16, 1.0f);
    try {
      et::detail::copy_bytes(0, nullptr, -1, host.data(), host.size() * sizeof(float));
      FAIL("copying to a null device pointer succeeded");
    } catch (const et::CudaError& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(e.code() != 0);
      CHECK_THAT(message, Contains("cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice") &&
                              Contains("memory.hpp:"));
    }
  }
  // The failure was not sticky: the error state is clear and device 0 still computes.
  CHECK(cudaGetLastError() == cudaSuccess);
  int current = -1;
  CHECK(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
  const auto x = et::arange<std::int64_t>(et::cuda<0>, 1000);
  const et::Tensor<std::int64_t, 1, Gpu> y = x * 3 - 1;
  std::vector<std::int64_t> expected(1000);
  for (std::int64_t i = 0; i < 1000; ++i) expected[static_cast<std::size_t>(i)] = 3 * i - 1;
  CHECK(y.to_vector() == expected);
}
