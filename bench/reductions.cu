// Reduction throughput beside the physical limit (a device-to-device copy):
//   sum((x - y)^2) over 2^28 floats          bytes = two inputs read once (2 GiB)
//   row sums    of a 16384 x 16384 matrix    bytes = the matrix read once (1 GiB)
//   column sums of a 16384 x 16384 matrix    bytes = the matrix read once (1 GiB)
// Each result is checked against a double-precision reduction of the same data on the
// GPU (etensor's double path, a different kernel instantiation and accumulator).
// Timing: CUDA events around each repetition after warm-up; the median is reported.
//
// Usage: et_bench_reductions [--json PATH] [--reps N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

double median_us(const std::function<void()>& work, int reps) {
  cudaEvent_t start{}, stop{};
  ET_CUDA_CHECK(cudaEventCreate(&start));
  ET_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) work();  // warm-up: pool growth, module load
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    ET_CUDA_CHECK(cudaEventRecord(start, et::current_stream(et::cuda<0>).native()));
    work();
    ET_CUDA_CHECK(cudaEventRecord(stop, et::current_stream(et::cuda<0>).native()));
    ET_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000.0);
  }
  ET_CUDA_CHECK(cudaEventDestroy(start));
  ET_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  std::string workload;
  double bytes, us, reference_error;
  bool ok;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
  }
  if (!et::cuda_available()) {
    std::printf("et_bench_reductions: no CUDA device\n");
    return 77;
  }
  const auto& props = et::device_properties(0);
  std::printf("device: %s, %d SMs\n", props.name.c_str(), props.multiprocessors);

  // The physical limit: a 1 GiB device-to-device copy, bytes read + written.
  const std::size_t copy_bytes = std::size_t{1} << 30;
  auto source = et::empty<float>(et::cuda<0>, {static_cast<std::int64_t>(copy_bytes / 4)});
  auto target = et::empty<float>(et::cuda<0>, {static_cast<std::int64_t>(copy_bytes / 4)});
  const double copy_us = median_us(
      [&] { ET_CUDA_CHECK(cudaMemcpyAsync(target.data(), source.data(), copy_bytes, cudaMemcpyDeviceToDevice, et::current_stream(et::cuda<0>).native())); },
      reps);
  const double copy_gbps = 2.0 * copy_bytes / copy_us / 1e3;
  std::printf("device-to-device copy of 1 GiB: %.1f us, %.1f GB/s (bytes read + written)\n\n", copy_us, copy_gbps);
  source = {};
  target = {};

  std::vector<Row> rows;
  auto relative = [](double got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1e-30); };

  {
    const std::int64_t n = std::int64_t{1} << 28;
    const auto x = et::randn<float>(et::cuda<0>, {n}, 1);
    const auto y = et::randn<float>(et::cuda<0>, {n}, 2);
    et::Tensor<float, 0, Gpu> result;
    const double us = median_us([&] { result = et::sum((x - y) * (x - y)); }, reps);
    const double want = et::sum(et::square(et::cast<double>(x) - et::cast<double>(y))).item();
    const double error = relative(result.item(), want);
    rows.push_back({"sum((x-y)^2) 2^28", 2.0 * 4 * n, us, error, error < 1e-4});
  }
  {
    const std::int64_t side = 16384;
    const auto m = et::randn<float>(et::cuda<0>, {side, side}, 3);
    const auto md = et::eval(et::cast<double>(m));
    et::Tensor<float, 1, Gpu> sums;
    for (int axis : {1, 0}) {
      const double us = median_us([&] { sums = et::sum(m, axis); }, reps);
      const auto got = sums.to_vector();
      const auto want = et::sum(md, axis).to_vector();
      double worst = 0;  // sums of 16384 N(0,1) values: compare against their scale, sqrt(16384)
      for (std::size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]) / 128.0);
      rows.push_back({axis == 1 ? "row sums 16384^2" : "column sums 16384^2", 4.0 * side * side, us, worst, worst < 1e-5});
    }
  }

  std::printf("%-24s %12s %12s %10s %10s %12s\n", "workload", "etensor us", "GB/s", "copy GB/s", "et/copy", "check");
  bool ok = true;
  for (const Row& r : rows) {
    const double gbps = r.bytes / r.us / 1e3;
    std::printf("%-24s %12.1f %12.1f %10.1f %10.3f %8.1e %s\n", r.workload.c_str(), r.us, gbps, copy_gbps,
                gbps / copy_gbps, r.reference_error, r.ok ? "ok" : "WRONG");
    ok = ok && r.ok;
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"benchmark\": \"reductions\", \"device\": \"" << props.name << "\", \"copy_GBps\": " << copy_gbps
        << ", \"results\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ", " : "") << "{\"workload\": \"" << r.workload << "\", \"bytes\": " << r.bytes << ", \"us\": " << r.us
          << ", \"GBps\": " << r.bytes / r.us / 1e3 << ", \"over_copy\": " << r.bytes / r.us / 1e3 / copy_gbps
          << ", \"error\": " << r.reference_error << ", \"ok\": " << (r.ok ? "true" : "false") << "}";
    }
    out << "]}\n";
  }
  std::printf("\n%s\n", ok ? "PASS: every result matches the double-precision reduction" : "FAIL: a result is wrong");
  return ok ? 0 : 1;
}
