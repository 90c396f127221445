// Convolution throughput on the GPU: conv 3x3, N=32, C=K=128, 56x56, padding 1, stride 1
// (a ResNet-50 stage-1 layer), forward, no bias:
//   bf16 nhwc                 (tensor cores, float accumulation)
//   fp32 nchw, TF32 allowed   (PyTorch's default: torch.backends.cudnn.allow_tf32 = True)
//   fp32 nchw, TF32 off       (full float precision)
// bench/peers_conv.py runs the same three in PyTorch (cudnn.benchmark = True, the same TF32
// setting per row, channels_last for nhwc) and prints both side by side.
//
// Timing: the first call (which runs etensor's algorithm search) is timed on its own;
// then after warm-up, `reps` repetitions of `iters` back-to-back calls, each repetition
// between a CUDA event pair; the median per call is reported, so the GPU time is measured,
// not the host's launch latency. Each result is checked against a double-precision
// convolution of the same (rounded) inputs on the GPU.
//
// Usage: et_bench_conv [--json PATH] [--reps N] [--iters N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;
constexpr std::int64_t N = 32, C = 128, K = 128, H = 56, W = 56, R = 3, S = 3;
constexpr double flops = 2.0 * N * K * C * R * S * H * W;  // P = H, Q = W with padding 1

/// Median microseconds per call of `work`, over `reps` event-timed batches of `iters` calls.
double median_us_per_call(const std::function<void()>& work, int reps, int iters) {
  cudaEvent_t start{}, stop{};
  ET_CUDA_CHECK(cudaEventCreate(&start));
  ET_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) work();
  std::vector<double> times;
  for (int rep = 0; rep < reps; ++rep) {
    ET_CUDA_CHECK(cudaEventRecord(start, et::current_stream(et::cuda<0>).native()));
    for (int i = 0; i < iters; ++i) work();
    ET_CUDA_CHECK(cudaEventRecord(stop, et::current_stream(et::cuda<0>).native()));
    ET_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(1000.0 * ms / iters);
  }
  ET_CUDA_CHECK(cudaEventDestroy(start));
  ET_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  std::string workload, dtype, layout, tf32;  // tf32: "on", "off", or "-" where it does not apply
  double us, search_ms, error, tolerance;
  et::detail::cudnn_backend::SearchReport search;
  bool ok() const { return error <= tolerance; }
};

/// max |got - reference| / max |reference| on the GPU.
template <class T>
double relative_error(const et::Tensor<T, 4, Gpu>& got, const et::Tensor<double, 4, Gpu>& reference) {
  const double worst = et::max(et::abs(et::cast<double>(got) - reference)).item();
  return worst / et::max(et::abs(reference)).item();
}

template <class T>
Row run(const std::string& workload, et::Layout layout, bool tf32, double tolerance, int reps, int iters) {
  const bool nhwc = layout == et::Layout::nhwc;
  const auto x = et::randn<T>(et::cuda<0>, nhwc ? et::Shape<4>{N, H, W, C} : et::Shape<4>{N, C, H, W}, 1);
  const auto w = et::randn<T>(et::cuda<0>, nhwc ? et::Shape<4>{K, R, S, C} : et::Shape<4>{K, C, R, S}, 2);
  const et::Conv2dOptions options{.padding = {1, 1}, .layout = layout, .allow_tf32 = tf32};

  et::Tensor<T, 4, Gpu> y;
  et::synchronize(et::cuda<0>);
  const auto t0 = std::chrono::steady_clock::now();
  y = et::conv2d(x, w, options);  // a new configuration: searches, then runs the fastest plan
  et::synchronize(et::cuda<0>);
  const double search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto search = et::detail::cudnn_backend::last_search();

  const double us = median_us_per_call([&] { y = et::conv2d(x, w, options); }, reps, iters);

  const et::Conv2dOptions exact{.padding = {1, 1}, .layout = layout};
  const auto reference = et::conv2d(et::eval(et::cast<double>(x)), et::eval(et::cast<double>(w)), exact);
  const char* dtype = std::is_same_v<T, float> ? "float32" : "bfloat16";
  const char* tf32_text = !std::is_same_v<T, float> ? "-" : tf32 ? "on" : "off";
  return {workload, dtype, nhwc ? "nhwc" : "nchw", tf32_text, us, search_ms, relative_error(y, reference), tolerance,
          search};
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 20, iters = 10;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
  }
  if (!et::cuda_available()) {
    std::printf("et_bench_conv: no CUDA device\n");
    return 77;
  }
  const auto& props = et::device_properties(0);
  const std::size_t cudnn = cudnnGetVersion();
  std::printf("device: %s, %d SMs; cuDNN %zu.%zu.%zu at run time (built with %d.%d.%d)\n", props.name.c_str(),
              props.multiprocessors, cudnn / 10000, cudnn / 100 % 100, cudnn % 100, CUDNN_MAJOR, CUDNN_MINOR,
              CUDNN_PATCHLEVEL);
  std::printf("conv 3x3, N=%lld, C=K=%lld, %lldx%lld, padding 1, stride 1: %.1f GFLOP per call\n\n", (long long)N,
              (long long)C, (long long)H, (long long)W, flops / 1e9);

  std::vector<Row> rows;
  // Tolerances against the double-precision result: bfloat16 output rounding (2^-9) and
  // TF32 input rounding (2^-11 per factor) dominate; full float sums of 1152 products err
  // far below 1e-5 of the largest output.
  rows.push_back(run<et::bfloat16>("bf16 nhwc", et::Layout::nhwc, false, 2e-2, reps, iters));
  rows.push_back(run<float>("fp32 nchw tf32", et::Layout::nchw, true, 1e-2, reps, iters));
  rows.push_back(run<float>("fp32 nchw ieee", et::Layout::nchw, false, 1e-5, reps, iters));

  std::printf("%-16s %10s %10s %10s %8s %8s %6s %10s  %s\n", "workload", "us/call", "TFLOP/s", "search ms", "engine",
              "timed", "tf32", "error", "check");
  bool ok = true;
  for (const Row& r : rows) {
    std::printf("%-16s %10.1f %10.1f %10.1f %8lld %8d %6s %10.2e  %s\n", r.workload.c_str(), r.us, flops / r.us / 1e6,
                r.search_ms, (long long)r.search.engine, r.search.timed, r.tf32.c_str(), r.error,
                r.ok() ? "ok" : "WRONG");
    ok = ok && r.ok();
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"benchmark\": \"conv\", \"device\": \"" << props.name << "\", \"cudnn_version\": " << cudnn
        << ", \"shape\": {\"N\": " << N << ", \"C\": " << C << ", \"K\": " << K << ", \"H\": " << H << ", \"W\": " << W
        << ", \"R\": " << R << ", \"S\": " << S << ", \"padding\": 1, \"stride\": 1}, \"flops\": " << flops
        << ", \"results\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? ", " : "") << "{\"workload\": \"" << r.workload << "\", \"dtype\": \"" << r.dtype
          << "\", \"layout\": \"" << r.layout << "\", \"tf32\": \"" << r.tf32 << "\", \"us\": " << r.us
          << ", \"tflops\": " << flops / r.us / 1e6 << ", \"search_ms\": " << r.search_ms
          << ", \"engine\": " << r.search.engine << ", \"configurations\": " << r.search.configurations
          << ", \"timed\": " << r.search.timed << ", \"error\": " << r.error << ", \"tolerance\": " << r.tolerance
          << ", \"ok\": " << (r.ok() ? "true" : "false") << "}";
    }
    out << "]}\n";
  }
  std::printf("\n%s\n", ok ? "PASS: every result matches the double-precision convolution"
                           : "FAIL: a result differs from the double-precision convolution");
  return ok ? 0 : 1;
}
