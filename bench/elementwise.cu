// Fused elementwise throughput: etensor's one-kernel chain beside the physical limits.
//
// The chain (bench/peers.py and tests/gpu/test_elementwise.cu use exactly this one):
//
//   z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f - sqrt(square(y) + 1.0f) / (1.0f + relu(w))
//
// 17 operations: x*0.5, +y, tanh, sigmoid, *, abs, unary -, exp, *0.25, +, square, +1,
// sqrt, relu, 1+, /, -. Three float inputs read once and one float output written once:
// 16 bytes per element.
//
// Columns:
//   etensor  `z = chain(x, y, w)` into an existing tensor: one kernel, launched by etensor
//   hand     a hand-written float4 kernel of the same chain: what one kernel can reach
//   copy     cudaMemcpyAsync device to device on 1 GiB buffers, bytes read + written
// Timing: a CUDA event pair around every repetition, repetitions back to back on the
// stream, after warm-up; the median is reported. Below about 2^22 elements the data sit
// in L2 and the times measure launch cost rather than bandwidth.
//
// Usage: et_bench_elementwise [--json PATH] [--reps N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

using bench::Comparison;
using bench::compare_on_device;
using bench::json_string;
using bench::median_us;

using Gpu = et::Cuda<0>;
constexpr const char* chain_text =
    "z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f - sqrt(square(y) + 1.0f) / (1.0f + relu(w))";
constexpr int chain_ops = 17;
constexpr double bytes_per_element = 4.0 * sizeof(float);  // 3 inputs + 1 output
constexpr double tolerance = bench::elementwise_tolerance;

template <class X, class Y, class W>
auto chain(const X& x, const Y& y, const W& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f -
         et::sqrt(et::square(y) + 1.0f) / (1.0f + et::relu(w));
}

/// The chain for one element, and its double-precision reference.
struct Chain {
  __device__ float operator()(float x, float y, float w) const {
    const float sigmoid_w = 1.0f / (1.0f + expf(-w));
    const float relu_w = w < 0.0f ? 0.0f : w;
    return tanhf(x * 0.5f + y) * sigmoid_w + expf(-fabsf(x)) * 0.25f - sqrtf(y * y + 1.0f) / (1.0f + relu_w);
  }
  static double reference(double x, double y, double w) {
    return std::tanh(x * 0.5 + y) / (1.0 + std::exp(-w)) + std::exp(-std::fabs(x)) * 0.25 -
           std::sqrt(y * y + 1.0) / (1.0 + (w < 0 ? 0.0 : w));
  }
};

/// The hand-written limit kernel of the chain (bench/common.cuh): one float4 per thread.
void launch_hand_chain(const float* x, const float* y, const float* w, float* z, std::int64_t n) {
  bench::launch_hand_ternary<Chain>(x, y, w, z, n);
  ET_CUDA_CHECK(cudaGetLastError());
}

double gigabytes_per_second(double bytes, double us) { return bytes / (us * 1e-6) / 1e9; }

struct Row {
  std::int64_t elements = 0;
  double etensor_us = 0, hand_us = 0;
  Comparison etensor_vs_hand, hand_vs_double;
};

int run(const std::string& json_path, int reps) {
  const et::DeviceProperties& device = et::device_properties(0);
  std::printf("device: %s, %d SMs, %.1f MiB L2, %.1f GiB\n", device.name.c_str(), device.multiprocessors,
              static_cast<double>(device.l2_cache_bytes) / (1 << 20),
              static_cast<double>(device.total_memory) / (1 << 30));

  // (a) The copy ceiling.
  const std::size_t copy_bytes = std::size_t{1} << 30;
  void *copy_src = nullptr, *copy_dst = nullptr;
  ET_CUDA_CHECK(cudaMalloc(&copy_src, copy_bytes));
  ET_CUDA_CHECK(cudaMalloc(&copy_dst, copy_bytes));
  ET_CUDA_CHECK(cudaMemset(copy_src, 0x3c, copy_bytes));
  const double copy_us = median_us(
      [&] { ET_CUDA_CHECK(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice, bench::stream())); },
      3, reps);
  const double copy_gbps = gigabytes_per_second(2.0 * static_cast<double>(copy_bytes), copy_us);
  ET_CUDA_CHECK(cudaFree(copy_src));
  ET_CUDA_CHECK(cudaFree(copy_dst));
  std::printf("device-to-device copy of 1 GiB: %.1f us, %.1f GB/s (bytes read + written)\n\n", copy_us, copy_gbps);

  // (b), (c) The chain at every size; the smaller sizes use prefixes of the largest buffers.
  const std::vector<std::int64_t> sizes{std::int64_t{1} << 10, std::int64_t{1} << 16, std::int64_t{1} << 20,
                                        std::int64_t{1} << 24, std::int64_t{1} << 28};
  const std::int64_t largest = sizes.back();
  const auto x_all = et::randn<float>(et::cuda<0>, {largest}, 1);
  const auto y_all = et::randn<float>(et::cuda<0>, {largest}, 2);
  const auto w_all = et::randn<float>(et::cuda<0>, {largest}, 3);
  const auto z_all = et::empty<float>(et::cuda<0>, {largest});
  const auto hand_all = et::empty<float>(et::cuda<0>, {largest});
  auto prefix = [](const et::Tensor<float, 1, Gpu>& t, std::int64_t n) {
    return et::Tensor<float, 1, Gpu>(t.storage(), 0, {n}, {1});
  };

  std::printf("chain: %s\n%d operations, 3 float inputs + 1 float output = %.0f bytes per element; median of %d\n\n",
              chain_text, chain_ops, bytes_per_element, reps);
  std::printf("%-12s %11s %11s %12s %11s %12s %10s %8s %8s %10s\n", "workload", "elements", "etensor us",
              "etensor GB/s", "hand us", "hand GB/s", "copy GB/s", "et/copy", "et/hand", "max error");
  std::vector<Row> rows;
  bool all_ok = true;
  for (const std::int64_t n : sizes) {
    const auto x = prefix(x_all, n), y = prefix(y_all, n), w = prefix(w_all, n);
    auto z = prefix(z_all, n);
    float* hand = hand_all.data();
    Row row;
    row.elements = n;

    // Poison both outputs first: an element either kernel skipped stays NaN and fails.
    ET_CUDA_CHECK(cudaMemsetAsync(z.data(), 0xff, static_cast<std::size_t>(n) * sizeof(float), bench::stream()));
    ET_CUDA_CHECK(cudaMemsetAsync(hand, 0xff, static_cast<std::size_t>(n) * sizeof(float), bench::stream()));
    launch_hand_chain(x.data(), y.data(), w.data(), hand, n);
    z = chain(x, y, w);
    row.etensor_vs_hand = compare_on_device(z.data(), hand, n);
    row.hand_vs_double = bench::check_hand_on_host<Chain>(x.data(), y.data(), w.data(), hand, n);

    row.hand_us = median_us([&] { launch_hand_chain(x.data(), y.data(), w.data(), hand, n); }, 3, reps);
    row.etensor_us = median_us([&] { z = chain(x, y, w); }, 3, reps);

    const double bytes = bytes_per_element * static_cast<double>(n);
    const double et_gbps = gigabytes_per_second(bytes, row.etensor_us);
    const double hand_gbps = gigabytes_per_second(bytes, row.hand_us);
    const bool ok = row.etensor_vs_hand.ok() && row.hand_vs_double.ok();
    all_ok = all_ok && ok;
    std::printf("%-12s %11lld %11.2f %12.1f %11.2f %12.1f %10.1f %8.3f %8.3f %10.2e%s\n", "fused chain",
                static_cast<long long>(n), row.etensor_us, et_gbps, row.hand_us, hand_gbps, copy_gbps,
                et_gbps / copy_gbps, et_gbps / hand_gbps, row.etensor_vs_hand.max_error, ok ? "" : "  MISMATCH");
    if (!ok)
      std::printf("  etensor vs hand: max error %.3e, %llu non-finite; hand vs double: max error %.3e, %llu non-finite\n",
                  row.etensor_vs_hand.max_error, row.etensor_vs_hand.non_finite, row.hand_vs_double.max_error,
                  row.hand_vs_double.non_finite);
    rows.push_back(row);
  }
  std::printf("\n%s: every etensor result matches the hand kernel within %.0e (max |diff| / max(|ref|, 1))\n",
              all_ok ? "PASS" : "FAIL", tolerance);

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    char number[64];
    auto fmt = [&](double v) {
      std::snprintf(number, sizeof number, "%.6g", v);
      return std::string(number);
    };
    out << "{\n  \"benchmark\": \"elementwise\",\n  \"device\": " << json_string(device.name)
        << ",\n  \"multiprocessors\": " << device.multiprocessors << ",\n  \"l2_bytes\": " << device.l2_cache_bytes
        << ",\n  \"copy\": {\"bytes_per_copy\": " << copy_bytes << ", \"us\": " << fmt(copy_us)
        << ", \"GBps\": " << fmt(copy_gbps) << "},\n  \"chain\": " << json_string(chain_text)
        << ",\n  \"ops\": " << chain_ops << ",\n  \"bytes_per_element\": " << fmt(bytes_per_element)
        << ",\n  \"reps\": " << reps << ",\n  \"ok\": " << (all_ok ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double bytes = bytes_per_element * static_cast<double>(r.elements);
      const double et_gbps = gigabytes_per_second(bytes, r.etensor_us), hand_gbps = gigabytes_per_second(bytes, r.hand_us);
      out << "    {\"workload\": \"fused chain\", \"elements\": " << r.elements << ", \"etensor_us\": " << fmt(r.etensor_us)
          << ", \"etensor_GBps\": " << fmt(et_gbps) << ", \"hand_us\": " << fmt(r.hand_us)
          << ", \"hand_GBps\": " << fmt(hand_gbps) << ", \"copy_GBps\": " << fmt(copy_gbps)
          << ", \"etensor_over_copy\": " << fmt(et_gbps / copy_gbps) << ", \"etensor_over_hand\": " << fmt(et_gbps / hand_gbps)
          << ", \"max_error_vs_hand\": " << fmt(r.etensor_vs_hand.max_error)
          << ", \"non_finite\": " << r.etensor_vs_hand.non_finite
          << ", \"hand_max_error_vs_double\": " << fmt(r.hand_vs_double.max_error)
          << ", \"ok\": " << (r.etensor_vs_hand.ok() && r.hand_vs_double.ok() ? "true" : "false") << "}"
          << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]   (N >= 20)\n", argv[0]);
      return 2;
    }
  }
  if (reps < 20) {
    std::fprintf(stderr, "--reps must be at least 20 (the median needs them)\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 1;
  }
  try {
    return run(json_path, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchmark failed: %s\n", e.what());
    return 1;
  }
}
