// depth6 shared: six levels of one recurrence, each level using the previous one twice,
//
//   auto e1 = x * a / b * (b - x);
//   auto e2 = e1 * a / b * (b - e1);   ...   out = e6;
//
// evaluated by etensor as ONE assignment, beside a hand-written float4 kernel of the same
// function (3 loads and 1 store per element, e kept in a register: 16 bytes per element).
// The expression tree names each e_k twice, so a naive evaluator reads x 2^6 times or
// recomputes e_k 2^(6-k) times; the limit is one read of x, a and b. It is also the
// expression of bench/compile_time.sh's depth sweep (shared form, depth 6).
//
// Inputs keep every level finite and well conditioned: with u = e / b the recurrence is the
// logistic map u_k = a u_{k-1} (1 - u_{k-1}); x = u0 * b with u0 in [0.05, 0.95),
// a in [0.25, 2), b in [0.5, 2), so every u_k stays in (0, 0.5] and errors are amplified by
// at most 2 per level. Checks: etensor against the hand kernel on every element, and the
// hand kernel against a double-precision host evaluation on the first and last 2048, both
// within 1e-4 (max |diff| / max(|ref|, 1)).
// Timing: a CUDA event pair around every repetition, repetitions back to back, after
// warm-up; the median is reported. Target (scripts/bench-all): hand / etensor >= 0.90.
//
// Usage: et_bench_depth [--json PATH] [--reps N] [--max-log2 K]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

using bench::Comparison;
using bench::json_string;
using bench::median_us;

using Vector = et::Tensor<float, 1, et::Cuda<0>>;
constexpr double tolerance = 1e-4;
constexpr double target = 0.90;
constexpr const char* workload = "depth6 shared";
constexpr const char* expression =
    "e1 = x*a/b*(b-x); e2 = e1*a/b*(b-e1); ... e6 = e5*a/b*(b-e5); out = e6";

/// The shared form at depth 6, as bench/compile_time.sh writes it.
template <class X, class A, class B>
auto depth6_shared(const X& x, const A& a, const B& b) {
  auto e1 = x * a / b * (b - x);
  auto e2 = e1 * a / b * (b - e1);
  auto e3 = e2 * a / b * (b - e2);
  auto e4 = e3 * a / b * (b - e3);
  auto e5 = e4 * a / b * (b - e4);
  auto e6 = e5 * a / b * (b - e5);
  return e6;
}

/// The same for one element (the hand kernel's body), and its double-precision reference.
struct Depth6 {
  __device__ float operator()(float x, float a, float b) const {
    float e = x;
#pragma unroll
    for (int k = 0; k < 6; ++k) e = e * a / b * (b - e);
    return e;
  }
  static double reference(double x, double a, double b) {
    double e = x;
    for (int k = 0; k < 6; ++k) e = e * a / b * (b - e);
    return e;
  }
};

struct Row {
  std::int64_t elements = 0;
  double etensor_us = 0, hand_us = 0;
  Comparison etensor_vs_hand, hand_vs_double;
  bool ok() const { return etensor_vs_hand.ok() && hand_vs_double.ok(); }
};

std::string power_label(std::int64_t n) {
  int k = 0;
  while ((std::int64_t{1} << k) < n) ++k;
  return "2^" + std::to_string(k);
}

int run(const std::string& json_path, int reps, int max_log2) {
  const et::DeviceProperties& device = et::device_properties(0);
  std::printf("device: %s, %d SMs\n%s: %s\n", device.name.c_str(), device.multiprocessors, workload, expression);
  std::vector<std::int64_t> sizes;
  for (const int k : {20, 28})
    if (k <= max_log2) sizes.push_back(std::int64_t{1} << k);
  if (sizes.empty()) sizes.push_back(std::int64_t{1} << max_log2);

  std::vector<Row> rows;
  bool all_ok = true;
  std::printf("\n%-14s %-6s %12s %12s %10s %10s %12s %s\n", "workload", "size", "etensor us", "hand us", "hand/et",
              "GB/s et", "max error", "check");
  for (const std::int64_t n : sizes) {
    const Vector b = et::rand<float>(et::cuda<0>, {n}, 31) * 1.5f + 0.5f;
    const Vector a = et::rand<float>(et::cuda<0>, {n}, 32) * 1.75f + 0.25f;
    const Vector x = (et::rand<float>(et::cuda<0>, {n}, 33) * 0.9f + 0.05f) * b;
    Vector out = et::empty<float>(et::cuda<0>, {n});
    Vector hand = et::empty<float>(et::cuda<0>, {n});
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    ET_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, bytes, bench::stream()));  // NaN: a skipped element fails
    ET_CUDA_CHECK(cudaMemsetAsync(hand.data(), 0xff, bytes, bench::stream()));

    auto launch_hand = [&] {
      bench::launch_hand_ternary<Depth6>(x.data(), a.data(), b.data(), hand.data(), n);
      ET_CUDA_CHECK(cudaGetLastError());
    };
    auto launch_etensor = [&] { out = depth6_shared(x, a, b); };
    launch_hand();
    launch_etensor();

    Row row;
    row.elements = n;
    row.etensor_vs_hand = bench::compare_on_device(out.data(), hand.data(), n, tolerance);
    row.hand_vs_double = bench::check_hand_on_host<Depth6>(x.data(), a.data(), b.data(), hand.data(), n);
    row.hand_vs_double.tolerance = tolerance;
    row.hand_us = median_us(launch_hand, 3, reps);
    row.etensor_us = median_us(launch_etensor, 3, reps);
    all_ok = all_ok && row.ok();
    const double gbps = 16.0 * static_cast<double>(n) / (row.etensor_us * 1e-6) / 1e9;
    std::printf("%-14s %-6s %12.2f %12.2f %10.3f %10.1f %12.2e %s\n", workload, power_label(n).c_str(),
                row.etensor_us, row.hand_us, row.hand_us / row.etensor_us, gbps,
                std::max(row.etensor_vs_hand.max_error, row.hand_vs_double.max_error), row.ok() ? "ok" : "WRONG");
    if (!row.hand_vs_double.ok())
      std::printf("  the hand kernel differs from the double-precision host evaluation: %.2e\n",
                  row.hand_vs_double.max_error);
    if (row.etensor_vs_hand.non_finite || row.hand_vs_double.non_finite)
      std::printf("  %llu non-finite results\n", row.etensor_vs_hand.non_finite + row.hand_vs_double.non_finite);
    rows.push_back(row);
  }
  std::printf("\ntarget: hand / etensor >= %.2f:", target);
  for (const Row& r : rows)
    std::printf(" %s %.3f %s;", power_label(r.elements).c_str(), r.hand_us / r.etensor_us,
                r.hand_us / r.etensor_us >= target ? "met" : "MISSED");
  std::printf("\n%s\n", all_ok ? "PASS: etensor matches the hand kernel, and the hand kernel the double evaluation"
                               : "FAIL: a result differs from its reference");

  if (!json_path.empty()) {
    std::ofstream file(json_path);
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    char number[64];
    auto fmt = [&](double v) {
      std::snprintf(number, sizeof number, "%.6g", v);
      return std::string(number);
    };
    file << "{\n  \"benchmark\": \"depth\",\n  \"device\": " << json_string(device.name)
         << ",\n  \"expression\": " << json_string(expression) << ",\n  \"bytes_per_element\": 16"
         << ",\n  \"tolerance\": " << fmt(tolerance) << ",\n  \"target_hand_over_etensor\": " << fmt(target)
         << ",\n  \"reps\": " << reps << ",\n  \"ok\": " << (all_ok ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      file << "    {\"workload\": " << json_string(workload) << ", \"size\": " << json_string(power_label(r.elements))
           << ", \"elements\": " << r.elements << ", \"bytes\": " << fmt(16.0 * static_cast<double>(r.elements))
           << ", \"etensor_us\": " << fmt(r.etensor_us) << ", \"limit_us\": " << fmt(r.hand_us)
           << ", \"limit_kind\": \"hand float4 kernel\", \"hand_over_etensor\": " << fmt(r.hand_us / r.etensor_us)
           << ", \"max_error\": " << fmt(r.etensor_vs_hand.max_error)
           << ", \"hand_max_error_vs_double\": " << fmt(r.hand_vs_double.max_error)
           << ", \"non_finite\": " << r.etensor_vs_hand.non_finite + r.hand_vs_double.non_finite
           << ", \"ok\": " << (r.ok() ? "true" : "false") << ", \"note\": \"\"}" << (i + 1 < rows.size() ? "," : "")
           << "\n";
    }
    file << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30, max_log2 = 28;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--max-log2" && i + 1 < argc) {
      max_log2 = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--max-log2 K]   (N >= 10, 10 <= K <= 30)\n",
                   argv[0]);
      return 2;
    }
  }
  if (reps < 10 || max_log2 < 10 || max_log2 > 30) {
    std::fprintf(stderr, "--reps must be at least 10 and --max-log2 between 10 and 30\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    return run(json_path, reps, max_log2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_depth: %s\n", e.what());
    return 1;
  }
}
