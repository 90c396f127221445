// What the C++ benchmarks share: event timing, the on-device comparison of two float
// buffers, sampled checks of matrix products against double-precision dot products, and
// JSON strings. Header-only, one copy per benchmark executable (each is one .cu file).
#pragma once

#include <et/et.hpp>

#include "host_timing.hpp"  // median, wall_median_us, thread_counts

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace bench {

/// The stream etensor queues on (its device's current stream): hand kernels, copies and
/// timing events go there too, so that they are ordered with etensor's work.
inline cudaStream_t stream() { return et::current_stream(et::cuda<0>).native(); }

inline constexpr int block_threads = 256;

/// Median microseconds per call over `reps` event-timed batches of `iters` back-to-back
/// calls of launch(), the batches queued back to back.
template <class Launch>
double timed_median_us(Launch& launch, int reps, int iters) {
  std::vector<cudaEvent_t> events(2 * static_cast<std::size_t>(reps));
  for (auto& e : events) ET_CUDA_CHECK(cudaEventCreate(&e));
  for (int r = 0; r < reps; ++r) {
    ET_CUDA_CHECK(cudaEventRecord(events[2 * r], bench::stream()));
    for (int i = 0; i < iters; ++i) launch();
    ET_CUDA_CHECK(cudaEventRecord(events[2 * r + 1], bench::stream()));
  }
  ET_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
    times.push_back(1000.0 * ms / iters);
  }
  for (auto& e : events) ET_CUDA_CHECK(cudaEventDestroy(e));
  std::sort(times.begin(), times.end());
  return reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
}

/// Median microseconds of `reps` back-to-back runs of launch(), each between its own pair
/// of events, after `warmup` untimed runs. For short work (elementwise kernels), where
/// the GPU's clock state does not matter but launch queues do.
template <class Launch>
double median_us(Launch launch, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) launch();
  ET_CUDA_CHECK(cudaDeviceSynchronize());
  return timed_median_us(launch, reps, 1);
}

/// Median microseconds per call over `reps` event-timed batches of `iters` calls, after
/// `warmup_s` seconds of the same work. For heavy work (GEMM, convolution): a large GEMM
/// lowers the GPU's clocks within a second of starting from idle, and timing the boost
/// before that would compare clock states, not libraries (bench/peers_gemm.py warms up
/// the same way).
template <class Launch>
double steady_median_us(Launch launch, double warmup_s, int reps, int iters = 1) {
  const auto start = std::chrono::steady_clock::now();
  do {
    for (int i = 0; i < 4; ++i) launch();
    ET_CUDA_CHECK(cudaDeviceSynchronize());
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < warmup_s);
  return timed_median_us(launch, reps, iters);
}

/// Median microseconds of work() between an event pair, setup() queued before each start
/// event (untimed on the GPU as long as it is queued ahead), after `warmup` rounds.
template <class Setup, class Work>
double phase_median_us(Setup setup, Work work, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) setup(), work();
  ET_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> events(2 * static_cast<std::size_t>(reps));
  for (auto& e : events) ET_CUDA_CHECK(cudaEventCreate(&e));
  for (int r = 0; r < reps; ++r) {
    setup();
    ET_CUDA_CHECK(cudaEventRecord(events[2 * r], bench::stream()));
    work();
    ET_CUDA_CHECK(cudaEventRecord(events[2 * r + 1], bench::stream()));
  }
  ET_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
    times.push_back(1000.0 * ms);
  }
  for (auto& e : events) ET_CUDA_CHECK(cudaEventDestroy(e));
  return median(times);
}

/// Median host microseconds of work() up to et::synchronize, setup() (and the device
/// idle) before each span, after `warmup` spans.
template <class Setup, class Work>
double host_median_us(Setup setup, Work work, int warmup, int spans) {
  std::vector<double> times;
  for (int s = 0; s < warmup + spans; ++s) {
    setup();
    et::synchronize(et::cuda<0>);
    const auto start = std::chrono::steady_clock::now();
    work();
    et::synchronize(et::cuda<0>);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if (s >= warmup) times.push_back(took.count());
  }
  return median(times);
}

/// Largest |got - want| / max(|want|, 1) as float bits (non-negative floats order like
/// their bits), and how many elements are not finite on either side (unwritten poison).
__global__ void compare_kernel(const float* got, const float* want, std::int64_t n, unsigned* worst_bits,
                               unsigned long long* non_finite) {
  float worst = 0.0f;
  unsigned long long bad = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = got[i], r = want[i];
    if (!isfinite(g) || !isfinite(r)) {
      ++bad;
      continue;
    }
    worst = fmaxf(worst, fabsf(g - r) / fmaxf(fabsf(r), 1.0f));
  }
  atomicMax(worst_bits, __float_as_uint(worst));
  if (bad) atomicAdd(non_finite, bad);
}

/// The elementwise benchmarks' tolerance: max |got - want| / max(|want|, 1).
inline constexpr double elementwise_tolerance = 1e-5;

/// How far a result is from its reference, and whether that is within `tolerance`.
struct Comparison {
  double max_error = 0;
  unsigned long long non_finite = 0;
  double tolerance = elementwise_tolerance;
  bool ok() const { return non_finite == 0 && max_error <= tolerance; }
};

/// got against want, n floats on cuda:0, with compare_kernel.
inline Comparison compare_on_device(const float* got, const float* want, std::int64_t n,
                                    double tolerance = elementwise_tolerance) {
  unsigned* worst_bits = nullptr;
  unsigned long long* non_finite = nullptr;
  ET_CUDA_CHECK(cudaMalloc(&worst_bits, sizeof(unsigned)));
  ET_CUDA_CHECK(cudaMalloc(&non_finite, sizeof(unsigned long long)));
  ET_CUDA_CHECK(cudaMemset(worst_bits, 0, sizeof(unsigned)));
  ET_CUDA_CHECK(cudaMemset(non_finite, 0, sizeof(unsigned long long)));
  compare_kernel<<<et::device_properties(0).multiprocessors * 8, block_threads, 0, bench::stream()>>>(
      got, want, n, worst_bits, non_finite);
  ET_CUDA_CHECK(cudaGetLastError());
  unsigned bits = 0;
  Comparison result;
  result.tolerance = tolerance;
  ET_CUDA_CHECK(cudaMemcpy(&bits, worst_bits, sizeof bits, cudaMemcpyDeviceToHost));
  ET_CUDA_CHECK(cudaMemcpy(&result.non_finite, non_finite, sizeof result.non_finite, cudaMemcpyDeviceToHost));
  ET_CUDA_CHECK(cudaFree(worst_bits));
  ET_CUDA_CHECK(cudaFree(non_finite));
  float worst = 0;
  std::memcpy(&worst, &bits, sizeof worst);
  result.max_error = worst;
  return result;
}

/// Device-to-device copy bandwidth (bytes read plus written per second, in GB/s), 1 GiB.
inline double copy_bandwidth_gbs(int reps) {
  const std::int64_t n = std::int64_t{1} << 28;
  const auto a = et::zeros<float>(et::cuda<0>, {n});
  auto b = et::empty<float>(et::cuda<0>, {n});
  auto copy = [&] {
    ET_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), 4 * std::size_t(n), cudaMemcpyDeviceToDevice, bench::stream()));
  };
  return 2.0 * 4.0 * double(n) / (bench::median_us(copy, 3, reps) * 1e3);
}

/// A hand-written limit: z[i] = F{}(x[i], y[i], w[i]), one float4 per thread with
/// `const __restrict__` operands (read-only loads), the thread just past the last float4
/// finishing the n % 4 tail. F has `__device__ float operator()(float, float, float) const`.
template <class F>
__global__ void __launch_bounds__(block_threads)
    hand_ternary(const float* __restrict__ x, const float* __restrict__ y, const float* __restrict__ w,
                 float* __restrict__ z, std::int64_t n) {
  const F f{};
  const std::int64_t vectors = n / 4;
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (v < vectors) {
    const float4 a = reinterpret_cast<const float4*>(x)[v];
    const float4 b = reinterpret_cast<const float4*>(y)[v];
    const float4 c = reinterpret_cast<const float4*>(w)[v];
    reinterpret_cast<float4*>(z)[v] = make_float4(f(a.x, b.x, c.x), f(a.y, b.y, c.y), f(a.z, b.z, c.z), f(a.w, b.w, c.w));
  } else if (v == vectors) {
    for (std::int64_t i = vectors * 4; i < n; ++i) z[i] = f(x[i], y[i], w[i]);
  }
}

template <class F>
void launch_hand_ternary(const float* x, const float* y, const float* w, float* z, std::int64_t n) {
  const std::int64_t threads = n / 4 + 1;
  const auto blocks = static_cast<unsigned>((threads + block_threads - 1) / block_threads);
  hand_ternary<F><<<blocks, block_threads, 0, bench::stream()>>>(x, y, w, z, n);
}

/// A hand kernel's result z against F::reference (double precision, on the host) on the
/// first and last 2048 elements, so that the limit is itself known to compute the function.
template <class F>
Comparison check_hand_on_host(const float* x, const float* y, const float* w, const float* z, std::int64_t n) {
  Comparison result;
  const std::int64_t span = std::min<std::int64_t>(n, 2048);
  for (const std::int64_t start : {std::int64_t{0}, n - span}) {
    std::vector<float> hx(static_cast<std::size_t>(span)), hy(hx.size()), hw(hx.size()), hz(hx.size());
    const std::size_t bytes = hx.size() * sizeof(float);
    ET_CUDA_CHECK(cudaMemcpy(hx.data(), x + start, bytes, cudaMemcpyDeviceToHost));
    ET_CUDA_CHECK(cudaMemcpy(hy.data(), y + start, bytes, cudaMemcpyDeviceToHost));
    ET_CUDA_CHECK(cudaMemcpy(hw.data(), w + start, bytes, cudaMemcpyDeviceToHost));
    ET_CUDA_CHECK(cudaMemcpy(hz.data(), z + start, bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < hx.size(); ++i) {
      if (!std::isfinite(hz[i])) {
        ++result.non_finite;
        continue;
      }
      const double want = F::reference(hx[i], hy[i], hw[i]);
      result.max_error = std::max(result.max_error, std::fabs(hz[i] - want) / std::max(std::fabs(want), 1.0));
    }
  }
  return result;
}

/// A matrix's elements as doubles, row-major.
template <class T>
std::vector<double> host_values(const et::Tensor<T, 2, et::Cuda<0>>& t) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(t.numel()));
  for (const T& v : t.to_vector()) out.push_back(static_cast<double>(static_cast<float>(v)));
  return out;
}

/// Largest |z_ij - f(sum_k a_ik b_kj + bias_j)| / sum_k |a_ik b_kj| over 256 sampled
/// elements, f = ReLU when `relu`; `b_transposed`: b holds [n, k] (a weight) rather than
/// [k, n]; `bias` may be empty.
template <class T>
double sampled_error(const et::Tensor<T, 2, et::Cuda<0>>& a, const et::Tensor<T, 2, et::Cuda<0>>& b,
                     bool b_transposed, const et::Tensor<T, 2, et::Cuda<0>>& z, const std::vector<double>& bias = {},
                     bool relu = false) {
  const std::int64_t m = a.size(0), k = a.size(1), n = z.size(1);
  const auto av = host_values(a), bv = host_values(b), zv = host_values(z);
  std::mt19937_64 engine(7);
  std::uniform_int_distribution<std::int64_t> row(0, m - 1), col(0, n - 1);
  double worst = 0;
  for (int s = 0; s < 256; ++s) {
    const std::int64_t i = row(engine), j = col(engine);
    double sum = 0, scale = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      const double x = av[static_cast<std::size_t>(i * k + p)];
      const double y = bv[static_cast<std::size_t>(b_transposed ? j * k + p : p * n + j)];
      sum += x * y;
      scale += std::fabs(x * y);
    }
    if (!bias.empty()) {
      sum += bias[static_cast<std::size_t>(j)];
      scale += std::fabs(bias[static_cast<std::size_t>(j)]);
    }
    if (relu) sum = std::max(sum, 0.0);
    const double got = zv[static_cast<std::size_t>(i * n + j)];
    const double error = std::isfinite(got) ? std::fabs(got - sum) / std::max(scale, 1e-30) : INFINITY;
    worst = std::max(worst, error);
  }
  return worst;
}

/// text as a JSON string literal (quotes and backslashes escaped, control characters dropped).
inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace bench
