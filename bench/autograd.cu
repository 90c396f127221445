// Reverse-mode autograd on the GPU, each workload beside its limit; bench/peers_autograd.py
// runs the same in PyTorch eager and torch.compile; scripts/bench-all puts both in one table.
//
//   chain10 fwd+bwd   x, y, w: 2^28 floats (--log2) requiring grad; z = tanh(x * 0.5f + y) *
//                     sigmoid(w) + exp(-abs(x)) * 0.25f (bench/suite.cu's 10-op chain: ONE recorded
//                     node), then z.backward(g), g a ones tensor made once (one fused kernel writes
//                     the three gradients). Also the recorded forward alone ("chain10 fwd") and the
//                     backward alone ("chain10 bwd": the forward queued before the start event).
//   mlp3 fwd+bwd      h1 = relu(matmul(x, w1) + b1); h2 = relu(matmul(h1, w2) + b2);
//                     out = matmul(h2, w3) + b3; mean(out * out).backward(); x [256, 4096] (no
//                     grad), w_k [4096, 4096], b_k [4096]; float32, MathMode::exact (no TF32).
//   mlp3 tf32 ...     the same under et::MathModeGuard(MathMode::tf32) (PyTorch: TF32 allowed).
//   tiny recorded     1000 dependent y = y * 1.0001f + 0.5f on 1024 floats, each into a new tensor
//                     (1000 nodes): HOST microseconds per op, spans ending with et::synchronize;
//                     "bwd": et::sum(y).backward() through them, per node; "tiny no-grad fwd":
//                     the same loop under et::NoGradGuard.
//   tiny cpu ...      the same three on CPU tensors: no launch to hide behind, so "recorded fwd"
//                     minus "no-grad fwd" is the host cost of recording one operation.
// Each iteration makes fresh leaves (t.detach().requires_grad_(true): same storage, a new
// autograd state, host work only), so backward writes grad() once, as PyTorch's
// zero_grad(set_to_none=True). zero_grad() would keep zeros that the next backward adds into
// (one more kernel and 3 more arrays per input).
//
// Limits ("limit_us" in the JSON):
//   chain10        the bytes the math moves at the measured device-to-device copy bandwidth
//                  (1 GiB, read + written), at least one empty launch: fwd 3 in + 1 out (16
//                  B/element), bwd x, y, w, g in + 3 gradients out (28 B/element), both 44. Work
//                  beyond that shows as a ratio below 1.
//   mlp3           the same forward and backward written by hand with etensor under NoGradGuard
//                  (the same GEMMs; bias + ReLU in the forward GEMMs' epilogue, the masks applied
//                  by elementwise passes, the bias gradients by sums): no longer a floor since
//                  the recorded layers fuse those into their GEMMs (derivatives/linear.hpp).
//   tiny recorded  the same loop under NoGradGuard: one unrecorded op (one launch) per op or node.
// Checks: chain10's z and gradients against a plain one-thread-per-element kernel (1e-5 of
// max(|ref|, 1)); mlp3's six gradients against the hand-written backward (max |diff| / max
// |ref| <= 1e-4; x, w odd integers in [-3, 3], b half-integers: the forward is exact in float32
// in any order, so no ReLU mask differs; TF32: 5e-2, inputs rounded to 10-bit mantissas); tiny: y against the recurrence in double (1e-4: 1000
// dependent roundings), x.grad() against 1.0001f^1000 multiplied out in float.
// Timing: GPU rows, a CUDA event pair around every repetition after warm-up (mlp3: after one
// second of the same work, as et_bench_gemm), median; tiny rows, steady_clock spans, median.
//
// Usage: et_bench_autograd [--json PATH] [--reps N] [--log2 K]   (exit status 1 if a check fails)
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
#include <utility>
#include <vector>

namespace {

using bench::block_threads;
using bench::median_us;
using Check = bench::Comparison;
using Gpu = et::Cuda<0>;
using Vector = et::Tensor<float, 1, Gpu>;
using Matrix = et::Tensor<float, 2, Gpu>;
using Tensor0 = et::Tensor<float, 0, Gpu>;

constexpr std::int64_t mlp_batch = 256, mlp_width = 4096;
constexpr std::int64_t tiny_elements = 1024;
constexpr int tiny_ops = 1000;

template <class X, class Y, class W>
auto chain10(const X& x, const Y& y, const W& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f;
}

/// The reference: chain10 and its three gradients (upstream g), one element per thread.
__global__ void reference_chain10(const float* x, const float* y, const float* w, const float* g, float* z,
                                  float* gx, float* gy, float* gw, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float t = tanhf(x[i] * 0.5f + y[i]), s = 1.0f / (1.0f + expf(-w[i])), e = expf(-fabsf(x[i]));
  const float sign = x[i] > 0.0f ? 1.0f : x[i] < 0.0f ? -1.0f : 0.0f;
  const float dt = g[i] * s * (1.0f - t * t);  // d/d(x * 0.5f + y)
  z[i] = t * s + e * 0.25f;
  gx[i] = dt * 0.5f - g[i] * 0.25f * e * sign;
  gy[i] = dt;
  gw[i] = g[i] * t * s * (1.0f - s);
}

__global__ void empty_kernel() {}

/// A new leaf on t's storage that requires grad and has no grad() yet.
template <int R, class Dev>
et::Tensor<float, R, Dev> fresh_leaf(const et::Tensor<float, R, Dev>& t) {
  auto leaf = t.detach();
  leaf.requires_grad_(true);
  return leaf;
}

/// Odd integers in [-3, 3] (products and sums of them stay exact in float32).
Matrix odd_integers(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  const Matrix u = et::rand<float>(et::cuda<0>, {rows, cols}, seed);
  return Matrix(et::cast<float>(et::cast<std::int32_t>(u * 4.0f)) * 2.0f - 3.0f);
}
/// Half-integers in [-7.5, 7.5]: a pre-activation (integer + bias) is never 0.
Vector half_integers(std::int64_t n, std::uint64_t seed) {
  const Vector u = et::rand<float>(et::cuda<0>, {n}, seed);
  return Vector(et::cast<float>(et::cast<std::int32_t>(u * 16.0f)) - 7.5f);
}

/// max |got - want| / max |want|, on the device (NaN or an undefined got: not finite).
template <int R>
void add_relative(Check& check, const et::Tensor<float, R, Gpu>& got, const et::Tensor<float, R, Gpu>& want) {
  et::NoGradGuard no_grad;
  if (!got.defined()) {
    ++check.non_finite;
    return;
  }
  const double scale = std::max(double(et::max(et::abs(want)).item()), 1e-30);
  const double error = double(et::max(et::abs(got - want)).item()) / scale;
  if (!std::isfinite(error)) ++check.non_finite;
  else check.max_error = std::max(check.max_error, error);
}

void add_comparison(Check& check, const Check& other) {
  check.non_finite += other.non_finite;
  check.max_error = std::max(check.max_error, other.max_error);
}

struct Row {
  std::string workload, size;
  std::int64_t elements = 0;
  double bytes = 0, etensor_us = 0, limit_us = 0;  // limit_us 0: none
  std::string limit_kind;
  Check check;
  std::string note;
};

class Autograd {
 public:
  Autograd(int reps, int log2) : reps_(reps), log2_(log2) {}

  int run(const std::string& json_path) {
    const et::DeviceProperties& device = et::device_properties(0);
    std::printf("device: %s, %d SMs, %.1f MiB L2, %.1f GiB\n", device.name.c_str(), device.multiprocessors,
                static_cast<double>(device.l2_cache_bytes) / (1 << 20),
                static_cast<double>(device.total_memory) / (1 << 30));
    measure_copy();
    launch_floor_us_ = median_us([] { empty_kernel<<<1, 1, 0, bench::stream()>>>(); }, 3, reps_);
    std::printf("empty kernel launch (event pair around one launch): %.2f us\n", launch_floor_us_);
    chain(std::int64_t{1} << log2_);
    mlp(et::MathMode::exact);
    mlp(et::MathMode::tf32);
    tiny<Gpu>("tiny");
    tiny<et::Cpu>("tiny cpu");
    return report(json_path, device);
  }

 private:
  void measure_copy() {  // as bench/suite.cu
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

  void set_copy_limit(Row& row) const {
    const double copy_time = row.bytes / (copy_gbps_ * 1e9) * 1e6;
    row.limit_us = std::max(copy_time, launch_floor_us_);
    row.limit_kind = copy_time >= launch_floor_us_ ? "copy bandwidth" : "launch floor";
  }

  void chain(std::int64_t n) {
    const Vector x = et::randn<float>(et::cuda<0>, {n}, 11), y = et::randn<float>(et::cuda<0>, {n}, 12),
                 w = et::randn<float>(et::cuda<0>, {n}, 13);
    const Vector g = et::ones<float>(et::cuda<0>, {n});  // the upstream gradient, made once
    Check check;
    {
      Vector rz = et::empty<float>(et::cuda<0>, {n}), rx = et::empty<float>(et::cuda<0>, {n}),
             ry = et::empty<float>(et::cuda<0>, {n}), rw = et::empty<float>(et::cuda<0>, {n});
      reference_chain10<<<static_cast<unsigned>((n + block_threads - 1) / block_threads), block_threads, 0,
                          bench::stream()>>>(x.data(), y.data(), w.data(), g.data(), rz.data(), rx.data(), ry.data(),
                                             rw.data(), n);
      ET_CUDA_CHECK(cudaGetLastError());
      Vector xl = fresh_leaf(x), yl = fresh_leaf(y), wl = fresh_leaf(w);
      const Vector z = chain10(xl, yl, wl);
      z.backward(g);
      add_comparison(check, bench::compare_on_device(z.data(), rz.data(), n));
      for (const auto& [leaf, want] : {std::pair{xl, rx}, std::pair{yl, ry}, std::pair{wl, rw}}) {
        const Vector grad = leaf.grad();
        if (!grad.defined()) ++check.non_finite;
        else add_comparison(check, bench::compare_on_device(grad.data(), want.data(), n));
      }
    }
    Vector xl, yl, wl, z;  // the leaves and result of the latest iteration (replacing frees the last's)
    auto forward = [&] {
      xl = fresh_leaf(x), yl = fresh_leaf(y), wl = fresh_leaf(w);
      z = Vector(chain10(xl, yl, wl));  // one recorded node
    };
    auto backward = [&] { z.backward(g); };
    const std::string size = "2^" + std::to_string(log2_);
    Row both{"chain10 fwd+bwd", size, n, 44.0 * static_cast<double>(n)};
    both.etensor_us = median_us([&] { forward(), backward(); }, 3, reps_);
    Row fwd{"chain10 fwd", size, n, 16.0 * static_cast<double>(n)};
    fwd.etensor_us = median_us(forward, 3, reps_);
    Row bwd{"chain10 bwd", size, n, 28.0 * static_cast<double>(n)};
    bwd.etensor_us = bench::phase_median_us(forward, backward, 3, reps_);
    bwd.note = "z.backward(g): one fused kernel reads x, y, w, g and writes 3 gradients (28 B/element)";
    for (Row* row : {&both, &fwd, &bwd}) {
      row->check = check;
      set_copy_limit(*row);
      add(*row);
    }
  }

  void mlp(et::MathMode mode) {
    const et::MathModeGuard math(mode);  // every product built in this scope (the lambdas run in it)
    const bool tf32 = mode == et::MathMode::tf32;
    const Matrix x = odd_integers(mlp_batch, mlp_width, 31);
    const Matrix w1 = odd_integers(mlp_width, mlp_width, 32), w2 = odd_integers(mlp_width, mlp_width, 33),
                 w3 = odd_integers(mlp_width, mlp_width, 34);
    const Vector b1 = half_integers(mlp_width, 35), b2 = half_integers(mlp_width, 36),
                 b3 = half_integers(mlp_width, 37);
    Matrix lw1, lw2, lw3;
    Vector lb1, lb2, lb3;
    auto autograd = [&] {
      lw1 = fresh_leaf(w1), lw2 = fresh_leaf(w2), lw3 = fresh_leaf(w3);
      lb1 = fresh_leaf(b1), lb2 = fresh_leaf(b2), lb3 = fresh_leaf(b3);
      const Matrix h1 = et::relu(et::matmul(x, lw1) + lb1);
      const Matrix h2 = et::relu(et::matmul(h1, lw2) + lb2);
      const Matrix out = et::matmul(h2, lw3) + lb3;
      const Tensor0 loss = et::mean(out * out);
      loss.backward();
    };
    struct Grads {
      Matrix w1, w2, w3;
      Vector b1, b2, b3;
    };
    auto by_hand = [&] {  // d mean(out^2) / d out = 2 out / numel, then back through each layer
      et::NoGradGuard no_grad;
      const Matrix h1 = et::relu(et::matmul(x, w1) + b1);
      const Matrix h2 = et::relu(et::matmul(h1, w2) + b2);
      const Matrix out = et::matmul(h2, w3) + b3;
      [[maybe_unused]] const Tensor0 loss = et::mean(out * out);
      const Matrix d3 = out * (2.0f / static_cast<float>(out.numel()));
      const Matrix d2 = et::where(h2 > 0.0f, et::matmul(d3, w3.transpose(0, 1)), 0.0f);
      const Matrix d1 = et::where(h1 > 0.0f, et::matmul(d2, w2.transpose(0, 1)), 0.0f);
      return Grads{et::matmul(x.transpose(0, 1), d1), et::matmul(h1.transpose(0, 1), d2),
                   et::matmul(h2.transpose(0, 1), d3), et::sum(d1, 0), et::sum(d2, 0), et::sum(d3, 0)};
    };
    Row row{tf32 ? "mlp3 tf32 fwd+bwd" : "mlp3 fwd+bwd", "256x4096 x3", mlp_batch * mlp_width, 0};
    autograd();
    const Grads want = by_hand();
    add_relative(row.check, lw1.grad(), want.w1), add_relative(row.check, lw2.grad(), want.w2);
    add_relative(row.check, lw3.grad(), want.w3), add_relative(row.check, lb1.grad(), want.b1);
    add_relative(row.check, lb2.grad(), want.b2), add_relative(row.check, lb3.grad(), want.b3);
    row.check.tolerance = tf32 ? 5e-2 : 1e-4;
    row.etensor_us = bench::steady_median_us(autograd, 1.0, reps_);
    row.limit_us = bench::steady_median_us(by_hand, 1.0, reps_);
    row.limit_kind = "manual backward";
    const double flops = 8 * 2.0 * double(mlp_batch) * double(mlp_width) * double(mlp_width);
    char note[160];
    std::snprintf(note, sizeof note, "float32 %s; 8 GEMMs 256x4096x4096: %.1f TFLOP/s (manual %.1f)",
                  tf32 ? "TF32" : "exact", flops / (row.etensor_us * 1e6), flops / (row.limit_us * 1e6));
    row.note = note;
    add(row);
  }

  /// The dependent tiny-op loop on Dev (a CUDA device: launch-bound; the CPU: 1024 floats
  /// take well under a microsecond, so recorded minus no-grad is what recording costs).
  template <class Dev>
  void tiny(const std::string& name) {
    using Vector = et::Tensor<float, 1, Dev>;
    using Tensor0 = et::Tensor<float, 0, Dev>;
    const Vector start = et::randn<float>(Gpu{}, {tiny_elements}, 21).to(Dev{});
    Vector x, y;            // the span's leaf and its last result (with the graph: freed untimed)
    Tensor0 loss;
    auto reset = [&] { x = fresh_leaf(start), y = Vector{}, loss = Tensor0{}; };
    auto forward = [&] {
      Vector value = x;
      for (int e = 0; e < tiny_ops; ++e) value = Vector(value * 1.0001f + 0.5f);  // a new tensor: a node each
      y = std::move(value);
    };
    auto forward_no_grad = [&] {
      et::NoGradGuard no_grad;
      forward();
    };
    auto setup_backward = [&] { reset(), forward(), loss = et::sum(y); };
    // The check: one recorded span and its backward, against the recurrence on the host.
    setup_backward();
    loss.backward();
    Check check;
    check.tolerance = 1e-4;
    const Vector x_grad = x.grad();
    const std::vector<float> x0 = start.to_vector(), got = y.to_vector(),
                             grad = x_grad.defined() ? x_grad.to_vector() : std::vector<float>(x0.size(), NAN);
    float chained = 1.0f;  // the gradient: each node multiplies by 1.0001f, in float
    for (int e = 0; e < tiny_ops; ++e) chained *= 1.0001f;
    for (std::size_t i = 0; i < x0.size(); ++i) {
      double want = x0[i];
      for (int e = 0; e < tiny_ops; ++e) want = want * double(1.0001f) + 0.5;
      for (const auto& [value, ref] : {std::pair{double(got[i]), want}, std::pair{double(grad[i]), double(chained)}}) {
        if (!std::isfinite(value)) ++check.non_finite;
        else check.max_error = std::max(check.max_error, std::fabs(value - ref) / std::max(std::fabs(ref), 1.0));
      }
    }
    const int spans = std::max(5, reps_ / 4);
    const std::string size = std::to_string(tiny_ops) + " x 2^10";
    const double no_grad_us = bench::host_median_us(reset, forward_no_grad, 1, spans) / tiny_ops;
    Row recorded{name + " recorded fwd", size, tiny_elements, 12.0 * tiny_elements};
    recorded.etensor_us = bench::host_median_us(reset, forward, 1, spans) / tiny_ops;
    Row backward{name + " recorded bwd", size, tiny_elements, 12.0 * tiny_elements};
    backward.etensor_us = bench::host_median_us(setup_backward, [&] { loss.backward(); }, 1, spans) / tiny_ops;
    Row plain{name + " no-grad fwd", size, tiny_elements, 8.0 * tiny_elements};
    plain.etensor_us = no_grad_us;
    recorded.note = "host us per recorded y = y * 1.0001f + 0.5f (a new tensor each), span to et::synchronize";
    backward.note = "host us per node of et::sum(y).backward() through the 1000 nodes";
    plain.note = "the same loop under et::NoGradGuard: the tiny rows' limit";
    for (Row* row : {&recorded, &backward, &plain}) {
      row->check = check;
      if (row != &plain) row->limit_us = no_grad_us, row->limit_kind = "no-grad loop";
      add(*row);
    }
  }

  void add(const Row& row) {
    if (rows_.empty()) {
      std::printf("\n%-18s %-12s %12s %12s %10s %-16s %10s %s\n", "workload", "size", "etensor us", "limit us",
                  "limit/et", "limit", "max error", "check");
    }
    std::printf("%-18s %-12s %12.2f %12.2f %10.3f %-16s %10.2e %s\n", row.workload.c_str(), row.size.c_str(),
                row.etensor_us, row.limit_us, row.limit_us / row.etensor_us,
                row.limit_kind.empty() ? "-" : row.limit_kind.c_str(), row.check.max_error,
                row.check.ok() ? "ok" : "WRONG");
    if (!row.check.ok() && row.check.non_finite) std::printf("  %llu non-finite results\n", row.check.non_finite);
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
    using bench::json_string;
    out << "{\n  \"benchmark\": \"autograd\",\n  \"device\": " << json_string(device.name)
        << ",\n  \"copy\": {\"us\": " << fmt(copy_us_) << ", \"GBps\": " << fmt(copy_gbps_)
        << "},\n  \"launch_floor_us\": " << fmt(launch_floor_us_) << ",\n  \"reps\": " << reps_
        << ",\n  \"ok\": " << (ok ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      out << "    {\"workload\": " << json_string(r.workload) << ", \"size\": " << json_string(r.size)
          << ", \"elements\": " << r.elements << ", \"bytes\": " << fmt(r.bytes) << ", \"etensor_us\": "
          << fmt(r.etensor_us) << ", \"limit_us\": " << (r.limit_us > 0 ? fmt(r.limit_us) : "null")
          << ", \"limit_kind\": " << json_string(r.limit_kind) << ", \"max_error\": " << fmt(r.check.max_error)
          << ", \"non_finite\": " << r.check.non_finite << ", \"ok\": " << (r.check.ok() ? "true" : "false")
          << ", \"note\": " << json_string(r.note) << "}" << (i + 1 < rows_.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
    return ok ? 0 : 1;
  }

  int reps_, log2_;
  double copy_us_ = 0, copy_gbps_ = 0, launch_floor_us_ = 0;
  std::vector<Row> rows_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30, log2 = 28;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--log2" && i + 1 < argc) {
      log2 = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--log2 K]   (N >= 10, 10 <= K <= 29)\n", argv[0]);
      return 2;
    }
  }
  if (reps < 10 || log2 < 10 || log2 > 29) {
    std::fprintf(stderr, "--reps must be at least 10 and --log2 between 10 and 29\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    return Autograd(reps, log2).run(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_autograd: %s\n", e.what());
    return 1;
  }
}
