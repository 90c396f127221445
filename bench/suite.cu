// The benchmark suite's GPU workloads beyond the 17-op chain of bench/elementwise.cu, each
// beside its physical limit; bench/peers_suite.py runs the same workloads in PyTorch eager,
// torch.compile and CuPy, and scripts/bench-all puts everything in one table.
//
// Elementwise, at 2^10, 2^16, 2^20, 2^24 and 2^28 float elements (2-d ones square):
//   axpy            z = 1.5f * x + y                                   2 in, 1 out, 12 B/element
//   chain10         z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f
//                   10 operations (*, +, tanh, sigmoid, *, abs, -, exp, *, +)  3 in, 1 out, 16 B/element
//   bias-add        z = m + b, m [n, n], b [n] (a row vector broadcast down the rows: the
//                   linear kernel, b read at i % n)
//   transpose-add   z = x.transpose(0, 1) + y on [n, n] matrices (one operand read
//                   transposed: 32 x 32 tiles staged through shared memory)
// Other:
//   softmax         et::softmax(m, 1) over the rows of a 4096 x 4096 float matrix, into a new
//                   tensor (one kernel, et/ops/softmax.hpp); log-softmax and logsumexp (keepdim) likewise
//   cross-entropy   et::nn::cross_entropy(m, labels), the forward over the same matrix with
//                   int64 labels [4096] (one kernel; the logits read once)
//   launch-bound    1000 dependent expressions x = x * 0.5f + y on 1024 floats; microseconds
//                   per expression (the GPU waits for the host: this measures launch cost)
//
// Limits ("limit_us" in the JSON):
//   chain10         a hand-written float4 kernel of the same function (__restrict__ operands)
//   launch-bound    the same loop launching a hand-written kernel of x * 0.5f + y
//   the others      the bytes moved at the device-to-device copy bandwidth (1 GiB copy,
//                   bytes read + written), but never below one empty kernel launch timed the
//                   same way (at small sizes nothing beats a launch)
// Each etensor result is checked against a plain hand-written reference kernel (softmax:
// rows recomputed in double on the host; launch-bound: the same recurrence on the host).
// Timing: a CUDA event pair around every repetition, repetitions back to back, after
// warm-up; the median is reported.
//
// Usage: et_bench_suite [--json PATH] [--reps N] [--max-log2 K]   (exit status 1 if a check fails)
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

using Check = bench::Comparison;
using bench::compare_on_device;
using bench::json_string;
using bench::median_us;

using Gpu = et::Cuda<0>;
using Vector = et::Tensor<float, 1, Gpu>;
using Matrix = et::Tensor<float, 2, Gpu>;
using bench::block_threads;
constexpr float axpy_a = 1.5f;

template <class X, class Y, class W>
auto chain10(const X& x, const Y& y, const W& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f;
}

/// chain10 for one element, and its double-precision reference.
struct Chain10 {
  __device__ float operator()(float x, float y, float w) const {
    const float sigmoid_w = 1.0f / (1.0f + expf(-w));
    return tanhf(x * 0.5f + y) * sigmoid_w + expf(-fabsf(x)) * 0.25f;
  }
  static double reference(double x, double y, double w) {
    return std::tanh(x * 0.5 + y) / (1.0 + std::exp(-w)) + std::exp(-std::fabs(x)) * 0.25;
  }
};

/// The limit for launch-bound: x = x * 0.5f + y, one float4 per thread (n % 4 == 0).
__global__ void __launch_bounds__(block_threads)
    hand_halve_add(float* __restrict__ x, const float* __restrict__ y, std::int64_t n) {
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * block_threads + threadIdx.x;
  if (v < n / 4) {
    float4 a = reinterpret_cast<float4*>(x)[v];
    const float4 b = reinterpret_cast<const float4*>(y)[v];
    a.x = a.x * 0.5f + b.x, a.y = a.y * 0.5f + b.y, a.z = a.z * 0.5f + b.z, a.w = a.w * 0.5f + b.w;
    reinterpret_cast<float4*>(x)[v] = a;
  }
}

__global__ void empty_kernel() {}

// Plain one-element-per-thread reference kernels: obviously right, not tuned.
__global__ void reference_axpy(const float* x, const float* y, float* z, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) z[i] = axpy_a * x[i] + y[i];
}
__global__ void reference_bias_add(const float* m, const float* b, float* z, std::int64_t side) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < side * side) z[i] = m[i] + b[i % side];
}
__global__ void reference_transpose_add(const float* x, const float* y, float* z, std::int64_t side) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < side * side) z[i] = x[(i % side) * side + i / side] + y[i];
}

/// log(sum(exp(row))) of n floats, in double, shifted by the row's maximum.
double row_log_total(const float* in, std::int64_t n) {
  double top = -INFINITY, total = 0;
  for (std::int64_t c = 0; c < n; ++c) top = std::max(top, double(in[c]));
  for (std::int64_t c = 0; c < n; ++c) total += std::exp(double(in[c]) - top);
  return top + std::log(total);
}

unsigned blocks_for(std::int64_t threads) {
  return static_cast<unsigned>((threads + block_threads - 1) / block_threads);
}


struct Row {
  std::string workload, size;   // size: "2^20", "4096x4096", ...
  std::int64_t elements = 0;
  double bytes = 0, etensor_us = 0, limit_us = 0;
  std::string limit_kind;        // "hand float4 kernel", "copy bandwidth", "launch floor", ...
  int kernels = 1;               // etensor kernel launches per evaluation
  Check check;
  std::string note;
};

std::string power_label(std::int64_t n) {
  int k = 0;
  while ((std::int64_t{1} << k) < n) ++k;
  return "2^" + std::to_string(k);
}

class Suite {
 public:
  Suite(int reps, int max_log2) : reps_(reps) {
    for (int k : {10, 16, 20, 24, 28})
      if (k <= max_log2) sizes_.push_back(std::int64_t{1} << k);
  }

  int run(const std::string& json_path) {
    const et::DeviceProperties& device = et::device_properties(0);
    std::printf("device: %s, %d SMs, %.1f MiB L2, %.1f GiB\n", device.name.c_str(), device.multiprocessors,
                static_cast<double>(device.l2_cache_bytes) / (1 << 20),
                static_cast<double>(device.total_memory) / (1 << 30));
    measure_copy();
    launch_floor_us_ = median_us([] { empty_kernel<<<1, 1, 0, bench::stream()>>>(); }, 3, reps_);
    std::printf("empty kernel launch (event pair around one launch): %.2f us\n\n", launch_floor_us_);

    const std::int64_t largest = sizes_.back();
    x_ = et::randn<float>(et::cuda<0>, {largest}, 11);
    y_ = et::randn<float>(et::cuda<0>, {largest}, 12);
    w_ = et::randn<float>(et::cuda<0>, {largest}, 13);
    z_ = et::empty<float>(et::cuda<0>, {largest});
    reference_ = et::empty<float>(et::cuda<0>, {largest});
    for (const std::int64_t n : sizes_) axpy(n);
    for (const std::int64_t n : sizes_) chain(n);
    for (const std::int64_t n : sizes_) bias_add(n);
    for (const std::int64_t n : sizes_) transpose_add(n);
    x_ = y_ = w_ = z_ = reference_ = Vector{};
    row_operations(4096);
    launch_bound(1024, 1000);
    return report(json_path, device);
  }

 private:
  void measure_copy() {
    const std::size_t bytes = std::size_t{1} << 30;
    void *source = nullptr, *target = nullptr;
    ET_CUDA_CHECK(cudaMalloc(&source, bytes));
    ET_CUDA_CHECK(cudaMalloc(&target, bytes));
    ET_CUDA_CHECK(cudaMemset(source, 0x3c, bytes));
    copy_us_ = median_us(
        [&] { ET_CUDA_CHECK(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice, bench::stream())); }, 3,
        reps_);
    copy_gbps_ = 2.0 * static_cast<double>(bytes) / (copy_us_ * 1e-6) / 1e9;
    ET_CUDA_CHECK(cudaFree(source));
    ET_CUDA_CHECK(cudaFree(target));
    std::printf("device-to-device copy of 1 GiB: %.1f us, %.1f GB/s (bytes read + written)\n", copy_us_, copy_gbps_);
  }

  /// The limit of a bandwidth-bound workload: its bytes at the copy bandwidth, but no
  /// less than one launch.
  void set_copy_limit(Row& row) const {
    const double copy_time = row.bytes / (copy_gbps_ * 1e9) * 1e6;
    row.limit_us = std::max(copy_time, launch_floor_us_);
    row.limit_kind = copy_time >= launch_floor_us_ ? "copy bandwidth" : "launch floor";
  }

  static Vector prefix(const Vector& t, std::int64_t n) { return Vector(t.storage(), 0, {n}, {1}); }
  static Matrix square(const Vector& t, std::int64_t side) { return Matrix(t.storage(), 0, {side, side}, {side, 1}); }
  static std::int64_t side_of(std::int64_t n) { return std::llround(std::sqrt(static_cast<double>(n))); }

  /// Fills the first n outputs with NaN: an element a kernel skips then fails the check.
  static void poison(const Vector& t, std::int64_t n) {
    ET_CUDA_CHECK(cudaMemsetAsync(t.data(), 0xff, static_cast<std::size_t>(n) * sizeof(float), bench::stream()));
  }

  void axpy(std::int64_t n) {
    const Vector x = prefix(x_, n), y = prefix(y_, n);
    Vector z = prefix(z_, n);
    poison(z_, n);
    reference_axpy<<<blocks_for(n), block_threads, 0, bench::stream()>>>(x.data(), y.data(), reference_.data(), n);
    ET_CUDA_CHECK(cudaGetLastError());
    z = axpy_a * x + y;
    Row row{"axpy", power_label(n), n, 12.0 * static_cast<double>(n)};
    row.check = compare_on_device(z.data(), reference_.data(), n);
    row.etensor_us = median_us([&] { z = axpy_a * x + y; }, 3, reps_);
    set_copy_limit(row);
    add(row);
  }

  void chain(std::int64_t n) {
    const Vector x = prefix(x_, n), y = prefix(y_, n), w = prefix(w_, n);
    Vector z = prefix(z_, n);
    float* hand = reference_.data();
    poison(z_, n);
    poison(reference_, n);
    auto launch_hand = [&] {
      bench::launch_hand_ternary<Chain10>(x.data(), y.data(), w.data(), hand, n);
      ET_CUDA_CHECK(cudaGetLastError());
    };
    launch_hand();
    z = chain10(x, y, w);
    Row row{"chain10", power_label(n), n, 16.0 * static_cast<double>(n)};
    row.check = compare_on_device(z.data(), hand, n);
    const Check hand_check = bench::check_hand_on_host<Chain10>(x.data(), y.data(), w.data(), hand, n);
    if (!hand_check.ok()) {
      row.check.non_finite += hand_check.non_finite;
      row.check.max_error = std::max(row.check.max_error, hand_check.max_error);
      row.note = "hand kernel differs from the double-precision host evaluation";
    }
    row.limit_us = median_us(launch_hand, 3, reps_);
    row.limit_kind = "hand float4 kernel";
    row.etensor_us = median_us([&] { z = chain10(x, y, w); }, 3, reps_);
    add(row);
  }

  void bias_add(std::int64_t n) {
    const std::int64_t side = side_of(n);
    const Matrix m = square(x_, side);
    const Vector b = prefix(w_, side);
    Matrix z = square(z_, side);
    poison(z_, n);
    reference_bias_add<<<blocks_for(n), block_threads, 0, bench::stream()>>>(m.data(), b.data(), reference_.data(),
                                                                              side);
    ET_CUDA_CHECK(cudaGetLastError());
    z = m + b;
    Row row{"bias-add", std::to_string(side) + "x" + std::to_string(side), n,
            4.0 * (2.0 * static_cast<double>(n) + static_cast<double>(side))};
    row.check = compare_on_device(z.data(), reference_.data(), n);
    row.etensor_us = median_us([&] { z = m + b; }, 3, reps_);
    set_copy_limit(row);
    add(row);
  }

  void transpose_add(std::int64_t n) {
    const std::int64_t side = side_of(n);
    const Matrix x = square(x_, side), y = square(y_, side);
    Matrix z = square(z_, side);
    poison(z_, n);
    reference_transpose_add<<<blocks_for(n), block_threads, 0, bench::stream()>>>(x.data(), y.data(),
                                                                                   reference_.data(), side);
    ET_CUDA_CHECK(cudaGetLastError());
    z = x.transpose(0, 1) + y;
    Row row{"transpose-add", std::to_string(side) + "x" + std::to_string(side), n, 12.0 * static_cast<double>(n)};
    row.check = compare_on_device(z.data(), reference_.data(), n);
    row.etensor_us = median_us([&] { z = x.transpose(0, 1) + y; }, 3, reps_);
    set_copy_limit(row);
    add(row);
  }

  /// softmax, log-softmax and logsumexp over the rows of a 4096 x 4096 matrix, each one
  /// kernel; rows (first, last and a few between) recomputed in double on the host.
  void row_operations(std::int64_t side) {
    const Matrix m = et::randn<float>(et::cuda<0>, {side, side}, 14);
    const std::vector<float> input = m.to_vector();
    for (const std::string workload : {"softmax", "log-softmax", "logsumexp"}) {
      const bool lse = workload == "logsumexp", log = workload == "log-softmax";
      auto run = [&] {
        if (workload == "softmax") return et::softmax(m, 1);
        if (log) return et::log_softmax(m, 1);
        return et::logsumexp(m, 1, true);
      };
      auto result = run();
      const std::vector<float> output = result.to_vector();
      Check check;
      for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, side / 3, side / 2, side - 1}) {
        const float* in = input.data() + r * side;
        const double log_total = row_log_total(in, side);
        for (std::int64_t c = 0; c < (lse ? 1 : side); ++c) {
          const float got = output[static_cast<std::size_t>(lse ? r : r * side + c)];
          if (!std::isfinite(got)) {
            ++check.non_finite;
            continue;
          }
          // Softmax values are about 1/side: compare relative to the value itself.
          const double want = lse ? log_total : log ? double(in[c]) - log_total : std::exp(double(in[c]) - log_total);
          check.max_error = std::max(check.max_error, std::fabs(got - want) / (lse || log ? std::max(1.0, std::fabs(want)) : want));
        }
      }
      const double elements = static_cast<double>(side * side);
      Row row{workload, std::to_string(side) + "x" + std::to_string(side), side * side,
              lse ? 4.0 * (elements + static_cast<double>(side)) : 2.0 * 4.0 * elements};
      row.check = check;
      row.note = "one kernel: each row read once (held in registers), written once";
      row.etensor_us = median_us([&] { result = run(); }, 3, reps_);
      set_copy_limit(row);
      add(row);
    }
    cross_entropy(m, input);
  }

  /// The cross-entropy forward over the same matrix as logits, one label a row: one kernel
  /// reads the logits once (a row's logsumexp and its label's logit) and takes the mean
  /// (its last block adds the blocks' sums). Bytes: the logits, the labels and lse.
  /// The value is recomputed in double over every row on the host.
  void cross_entropy(const Matrix& m, const std::vector<float>& input) {
    const std::int64_t rows = m.size(0), classes = m.size(1);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = (r * 2654435761LL) % classes;
    const auto y = et::from_vector(et::cuda<0>, labels, {rows});
    et::Tensor<float, 0, Gpu> loss = et::nn::cross_entropy(m, y);
    double want = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* in = input.data() + r * classes;
      want += row_log_total(in, classes) - double(in[labels[static_cast<std::size_t>(r)]]);
    }
    want /= static_cast<double>(rows);
    Check check;
    const float got = loss.item();
    if (std::isfinite(got)) check.max_error = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    else ++check.non_finite;
    Row row{"cross-entropy", std::to_string(rows) + "x" + std::to_string(classes), rows * classes,
            4.0 * static_cast<double>(rows * classes) + 12.0 * static_cast<double>(rows)};
    row.check = check;
    row.kernels = 1;
    row.note = "forward in one kernel: logsumexp (the one read of the logits), x[label], the mean";
    row.etensor_us = median_us([&] { loss = et::nn::cross_entropy(m, y); }, 3, reps_);
    set_copy_limit(row);
    add(row);
  }

  /// `expressions` dependent evaluations of x = x * 0.5f + y in one timed span; the time
  /// per expression is the span over the count (median over several spans).
  void launch_bound(std::int64_t n, int expressions) {
    const Vector y = et::randn<float>(et::cuda<0>, {n}, 15);
    const Vector start = et::randn<float>(et::cuda<0>, {n}, 16);
    Vector x = et::empty<float>(et::cuda<0>, {n});
    Vector hand = et::empty<float>(et::cuda<0>, {n});
    auto reset = [&] {
      ET_CUDA_CHECK(cudaMemcpyAsync(x.data(), start.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, bench::stream()));
      ET_CUDA_CHECK(cudaMemcpyAsync(hand.data(), start.data(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    bench::stream()));
    };
    auto run_etensor = [&] {
      for (int e = 0; e < expressions; ++e) x = x * 0.5f + y;
    };
    auto run_hand = [&] {
      for (int e = 0; e < expressions; ++e)
        hand_halve_add<<<blocks_for(n / 4), block_threads, 0, bench::stream()>>>(hand.data(), y.data(), n);
      ET_CUDA_CHECK(cudaGetLastError());
    };
    // The check: one span from the same start, against the recurrence on the host.
    const std::vector<float> ys = y.to_vector();
    std::vector<float> want = start.to_vector();
    for (int e = 0; e < expressions; ++e)
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = want[i] * 0.5f + ys[i];
    auto check_span = [&] {
      const std::vector<float> got = x.to_vector(), by_hand = hand.to_vector();
      Check check;
      for (std::size_t i = 0; i < want.size(); ++i) {
        for (const float value : {got[i], by_hand[i]}) {
          if (!std::isfinite(value)) ++check.non_finite;
          else check.max_error = std::max(check.max_error, std::fabs(double(value) - want[i]) / std::max(std::fabs(double(want[i])), 1.0));
        }
      }
      return check;
    };
    reset();
    run_etensor();
    run_hand();
    const int spans = std::max(5, reps_ / 4);
    Row row{"launch-bound", std::to_string(expressions) + " x 2^10", n, 12.0 * static_cast<double>(n)};
    row.check = check_span();
    row.etensor_us = median_us(run_etensor, 1, spans) / expressions;
    row.limit_us = median_us(run_hand, 1, spans) / expressions;
    row.limit_kind = "hand kernel launches";
    row.note = "microseconds per dependent expression x = x * 0.5f + y on 1024 floats";
    add(row);

    // The same span captured once as a CUDA graph (et::capture) and replayed, beside the
    // hand kernels captured the same way: the graph saves the launch path.
    const auto stream = et::current_stream(et::cuda<0>);
    const auto graph = et::capture(stream, run_etensor);
    cudaGraph_t hand_graph{};
    cudaGraphExec_t hand_exec{};
    ET_CUDA_CHECK(cudaStreamBeginCapture(stream.native(), cudaStreamCaptureModeThreadLocal));
    run_hand();
    ET_CUDA_CHECK(cudaStreamEndCapture(stream.native(), &hand_graph));
    ET_CUDA_CHECK(cudaGraphInstantiate(&hand_exec, hand_graph, 0));
    auto replay_hand = [&] { ET_CUDA_CHECK(cudaGraphLaunch(hand_exec, stream.native())); };
    reset();
    graph.replay();
    replay_hand();
    Row replayed{"launch-bound graph", std::to_string(expressions) + " x 2^10", n, 12.0 * static_cast<double>(n)};
    replayed.check = check_span();
    replayed.etensor_us = median_us([&] { graph.replay(); }, 1, spans) / expressions;
    replayed.limit_us = median_us(replay_hand, 1, spans) / expressions;
    replayed.limit_kind = "hand kernels, graph";
    replayed.note = "the launch-bound span captured once with et::capture and replayed; per expression";
    add(replayed);
    ET_CUDA_CHECK(cudaGraphExecDestroy(hand_exec));
    ET_CUDA_CHECK(cudaGraphDestroy(hand_graph));
  }

  void add(const Row& row) {
    if (rows_.empty() || rows_.back().workload != row.workload) {
      std::printf("\n%-14s %-12s %12s %12s %10s %-20s %10s %s\n", "workload", "size", "etensor us", "limit us",
                  "limit/et", "limit", "max error", "check");
    }
    std::printf("%-14s %-12s %12.2f %12.2f %10.3f %-20s %10.2e %s\n", row.workload.c_str(), row.size.c_str(),
                row.etensor_us, row.limit_us, row.limit_us / row.etensor_us, row.limit_kind.c_str(),
                row.check.max_error, row.check.ok() ? "ok" : "WRONG");
    if (!row.check.ok() && row.check.non_finite)
      std::printf("  %llu non-finite results\n", row.check.non_finite);
    std::fflush(stdout);
    rows_.push_back(row);
  }

  int report(const std::string& json_path, const et::DeviceProperties& device) const {
    bool ok = true;
    for (const Row& r : rows_) ok = ok && r.check.ok();
    std::printf("\n%s\n", ok ? "PASS: every etensor result matches its reference"
                             : "FAIL: an etensor result differs from its reference");
    if (json_path.empty()) return ok ? 0 : 1;
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
    out << "{\n  \"benchmark\": \"suite\",\n  \"device\": " << json_string(device.name)
        << ",\n  \"copy\": {\"us\": " << fmt(copy_us_) << ", \"GBps\": " << fmt(copy_gbps_)
        << "},\n  \"launch_floor_us\": " << fmt(launch_floor_us_) << ",\n  \"reps\": " << reps_
        << ",\n  \"ok\": " << (ok ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      out << "    {\"workload\": " << json_string(r.workload) << ", \"size\": " << json_string(r.size)
          << ", \"elements\": " << r.elements << ", \"bytes\": " << fmt(r.bytes) << ", \"etensor_us\": "
          << fmt(r.etensor_us) << ", \"limit_us\": " << fmt(r.limit_us)
          << ", \"limit_kind\": " << json_string(r.limit_kind) << ", \"kernels\": " << r.kernels
          << ", \"max_error\": " << fmt(r.check.max_error) << ", \"non_finite\": " << r.check.non_finite
          << ", \"ok\": " << (r.check.ok() ? "true" : "false") << ", \"note\": " << json_string(r.note) << "}"
          << (i + 1 < rows_.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
    return ok ? 0 : 1;
  }

  int reps_;
  std::vector<std::int64_t> sizes_;
  double copy_us_ = 0, copy_gbps_ = 0, launch_floor_us_ = 0;
  Vector x_, y_, w_, z_, reference_;
  std::vector<Row> rows_;
};

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
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--max-log2 K]   (N >= 10, K >= 10)\n", argv[0]);
      return 2;
    }
  }
  if (reps < 10 || max_log2 < 10) {
    std::fprintf(stderr, "--reps must be at least 10 and --max-log2 at least 10\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    return Suite(reps, max_log2).run(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_suite: %s\n", e.what());
    return 1;
  }
}
