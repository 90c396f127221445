// Seconds per mini-batch of FCN-S (examples/fcn_s.hpp), in the format of Table 7 of Shi et
// al. 2016: the CPU at 1, 2, 4, 8 and 16 threads, then the GPU; bench/peers_fcn.py runs the
// same in PyTorch (eager on the CPU and GPU, torch.compile on the GPU) and scripts/bench-all
// puts both in one table.
//
//   a mini-batch   zero_grad(set_to_none), logits = model(x), cross_entropy(logits, labels),
//                  backward, SGD step (lr 0.01): x [64, 26752] normal, labels uniform; one
//                  batch made once on the device (the table times the training step, not
//                  data loading, as dlbench does with synthetic data).
//   gpu fp32       MathMode::exact (PyTorch with TF32 off); gpu tf32: MathMode::tf32.
//                  Also each phase alone (the others queued before the start event):
//                  "forward+loss", "backward", "step", where the time goes; and the same
//                  mini-batch with the SGD step in the backward (overlap_with_backward: each
//                  weight updated by its gradient's GEMM, W <- W - lr * g^T x with the
//                  GEMM's beta = 1, so no gradient is written; each bias on a side stream).
//   cpu N threads  omp_set_num_threads(N) (elementwise loops and Eigen's GEMMs); thread
//                  counts above the machine's cores are skipped. Host code for x86-64-v3
//                  (AVX2, FMA: bench/CMakeLists.txt); PyTorch's CPU GEMMs pick their ISA at run time.
//
// Limit ("limit_us", GPU rows): the bytes a mini-batch must move at the measured
// device-to-device copy bandwidth: every weight read by the forward, the weights of layers
// 2-4 read again for the input gradients, every gradient written, then read with the
// parameters and the parameters written by the step (24 bytes per parameter, less 4 per
// weight of layer 1; 16 for a weight whose update is folded into its gradient's GEMM,
// which reads and writes the weight and writes no gradient). The GEMMs' arithmetic comes
// on top in fp32.
// Check: the GPU's fp32 losses over 3 steps are the CPU's (relative 1e-3: summation orders
// differ) and go down, and with the step in the backward within 1e-5 of those; TF32
// within 1e-2.
// Timing: GPU, a CUDA event pair around every step after warm-up, median; CPU, steady_clock
// around every step (ending with item(), which waits), median.
//
// Usage: et_bench_fcn [--json PATH] [--reps N] [--cpu-reps N] [--threads 1,2,4,8,16]
#include "../examples/fcn_s.hpp"

#include "common.cuh"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

struct Row {
  std::string workload;
  double etensor_us = 0, limit_us = 0;
  bool ok = true;
  std::string note;
};

template <et::Device D>
std::vector<float> losses(D dev, const fcn::Sizes& sizes, int steps, bool overlap = false) {
  auto model = fcn::make_model(dev, sizes);
  const auto batch = fcn::synthetic_batch(dev, sizes, 7);
  et::optim::SGD opt(model.parameters(), {.lr = 0.01});
  if (overlap) opt.overlap_with_backward();
  std::vector<float> out;
  for (int k = 0; k < steps; ++k) out.push_back(fcn::train_step(model, opt, batch).item());
  return out;
}

bool close(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  for (std::size_t k = 0; k < want.size(); ++k)
    if (!(std::abs(got[k] - want[k]) <= tolerance * std::abs(want[k]))) return false;
  return got.back() < got.front();
}

class Fcn {
 public:
  Fcn(int reps, int cpu_reps, std::vector<int> threads) : reps_(reps), cpu_reps_(cpu_reps), threads_(threads) {}

  int run(const std::string& json_path) {
    const et::DeviceProperties& device = et::device_properties(0);
    std::printf("device: %s; host: %d cores\n", device.name.c_str(), omp_get_num_procs());
    measure_copy();
    check();
    gpu("gpu fp32", et::MathMode::exact, false);
    gpu("gpu fp32, step in backward", et::MathMode::exact, true);
    gpu("gpu tf32", et::MathMode::tf32, false);
    gpu("gpu tf32, step in backward", et::MathMode::tf32, true);
    for (const int t : threads_) cpu(t);
    return report(json_path, device);
  }

 private:
  void measure_copy() {
    const std::size_t bytes = std::size_t{1} << 30;
    void *source = nullptr, *target = nullptr;
    ET_CUDA_CHECK(cudaMalloc(&source, bytes));
    ET_CUDA_CHECK(cudaMalloc(&target, bytes));
    ET_CUDA_CHECK(cudaMemset(source, 0x3c, bytes));
    const double us = bench::median_us(
        [&] { ET_CUDA_CHECK(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice, bench::stream())); }, 3,
        reps_);
    copy_gbps_ = 2.0 * static_cast<double>(bytes) / (us * 1e-6) / 1e9;
    ET_CUDA_CHECK(cudaFree(source));
    ET_CUDA_CHECK(cudaFree(target));
    std::printf("device-to-device copy of 1 GiB: %.1f GB/s (bytes read + written)\n", copy_gbps_);
  }

  /// The losses of 3 steps on the GPU (fp32, tf32) against the CPU's; with the step in the
  /// backward, the same losses as without to float's precision (the folded update rounds
  /// once less).
  void check() {
    const auto cpu = losses(et::cpu, sizes_, 3);
    const auto exact = losses(et::cuda<0>, sizes_, 3);
    const auto overlapped = losses(et::cuda<0>, sizes_, 3, true);
    overlap_ok_ = close(overlapped, exact, 1e-5);
    std::vector<float> tf32;
    {
      et::MathModeGuard guard(et::MathMode::tf32);
      tf32 = losses(et::cuda<0>, sizes_, 3);
    }
    exact_ok_ = close(exact, cpu, 1e-3) && overlap_ok_;
    tf32_ok_ = close(tf32, cpu, 1e-2);
    std::printf("fp32 losses with the step in the backward: %.5f %.5f %.5f (%s)\n", overlapped[0], overlapped[1],
                overlapped[2], overlap_ok_ ? "ok" : "DIFFERENT");
    std::printf("losses of 3 steps: cpu %.5f %.5f %.5f; gpu fp32 %.5f %.5f %.5f (%s); gpu tf32 %.5f %.5f %.5f (%s)\n",
                cpu[0], cpu[1], cpu[2], exact[0], exact[1], exact[2], exact_ok_ ? "ok" : "WRONG", tf32[0], tf32[1],
                tf32[2], tf32_ok_ ? "ok" : "WRONG");
  }

  /// `folded`: the weights' update in their gradients' GEMMs, which read and write the
  /// weights instead of writing gradients that the step reads: 16 bytes per weight.
  double bytes_floor_us(bool folded) const {
    const double in = double(sizes_.input), h = double(sizes_.hidden), out = double(sizes_.output);
    const double weights = in * h + 2 * h * h + h * out, biases = 3 * h + out;
    return ((folded ? 16.0 : 24.0) * weights + 24.0 * biases - 4.0 * in * h) / (copy_gbps_ * 1e9) * 1e6;
  }

  /// `overlap`: the step in the backward (SGD::overlap_with_backward): each weight updated by
  /// its gradient's GEMM, each bias on a side stream once its gradient is complete.
  void gpu(const std::string& name, et::MathMode mode, bool overlap) {
    et::MathModeGuard guard(mode);
    auto model = fcn::make_model(et::cuda<0>, sizes_);
    const auto batch = fcn::synthetic_batch(et::cuda<0>, sizes_, 7);
    et::optim::SGD opt(model.parameters(), {.lr = 0.01});
    if (overlap) opt.overlap_with_backward();
    const bool ok = mode == et::MathMode::exact ? exact_ok_ : tf32_ok_;
    Row whole{name, 0, bytes_floor_us(overlap), ok,
              overlap ? "weights updated in their gradients' GEMMs" : "forward, loss, backward, step"};
    whole.etensor_us = bench::median_us([&] { fcn::train_step(model, opt, batch); }, 3, reps_);
    add(whole);
    if (overlap) return;
    // Where the time goes: each phase timed alone, what comes before it queued first.
    et::Tensor<float, 0, Gpu> loss;
    auto forward = [&] {
      opt.zero_grad(true);
      loss = et::nn::cross_entropy(model(batch.x), batch.labels);
    };
    auto backward = [&] { loss.backward(); };
    auto step = [&] { opt.step(); };
    add({name + " forward+loss", bench::phase_median_us([] {}, forward, 3, reps_), 0, ok, ""});
    add({name + " backward", bench::phase_median_us(forward, backward, 3, reps_), 0, ok, ""});
    add({name + " step", bench::phase_median_us([&] { forward(), backward(); }, step, 3, reps_), 0, ok,
         "one SGD kernel for all 8 parameters"});
  }

  void cpu(int threads) {
    const std::string name = "cpu " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    if (threads > omp_get_num_procs()) {
      std::printf("%-28s skipped: %d cores\n", name.c_str(), omp_get_num_procs());
      return;
    }
    omp_set_num_threads(threads);
    auto model = fcn::make_model(et::cpu, sizes_);
    const auto batch = fcn::synthetic_batch(et::cpu, sizes_, 7);
    et::optim::SGD opt(model.parameters(), {.lr = 0.01});
    std::vector<double> times;
    for (int k = 0; k < 1 + cpu_reps_; ++k) {
      const auto start = std::chrono::steady_clock::now();
      (void)fcn::train_step(model, opt, batch).item();
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      if (k > 0) times.push_back(took.count());
    }
    omp_set_num_threads(omp_get_num_procs());
    add({name, bench::median(times), 0, exact_ok_, "Eigen GEMMs, OpenMP loops"});
  }

  void add(const Row& row) {
    std::printf("%-28s %10.3f ms", row.workload.c_str(), row.etensor_us / 1e3);
    if (row.limit_us > 0) std::printf("   limit %.3f ms (bytes at copy bandwidth)", row.limit_us / 1e3);
    std::printf("%s\n", row.ok ? "" : "   CHECK FAILED");
    std::fflush(stdout);
    rows_.push_back(row);
  }

  int report(const std::string& json_path, const et::DeviceProperties& device) const {
    const bool ok = exact_ok_ && tf32_ok_;
    std::printf("\n%s\n", ok ? "PASS: the GPU's losses are the CPU's" : "FAIL: the GPU's losses differ from the CPU's");
    if (json_path.empty()) return ok ? 0 : 1;
    std::ofstream out(json_path);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    using bench::json_string;
    out << "{\n  \"benchmark\": \"fcn\",\n  \"device\": " << json_string(device.name)
        << ",\n  \"cores\": " << omp_get_num_procs() << ",\n  \"copy_GBps\": " << copy_gbps_
        << ",\n  \"ok\": " << (ok ? "true" : "false") << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      out << "    {\"workload\": " << json_string(r.workload) << ", \"size\": \"batch 64\", \"etensor_us\": "
          << r.etensor_us << ", \"limit_us\": " << (r.limit_us > 0 ? std::to_string(r.limit_us) : "null")
          << ", \"limit_kind\": " << json_string(r.limit_us > 0 ? "bytes at copy bandwidth" : "")
          << ", \"ok\": " << (r.ok ? "true" : "false") << ", \"note\": " << json_string(r.note) << "}"
          << (i + 1 < rows_.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
    return ok ? 0 : 1;
  }

  fcn::Sizes sizes_;
  int reps_, cpu_reps_;
  std::vector<int> threads_;
  double copy_gbps_ = 0;
  bool exact_ok_ = false, tf32_ok_ = false, overlap_ok_ = false;
  std::vector<Row> rows_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30, cpu_reps = 3;
  std::vector<int> threads{1, 2, 4, 8, 16};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--cpu-reps" && i + 1 < argc) {
      cpu_reps = std::atoi(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = bench::thread_counts(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--cpu-reps N] [--threads 1,2,4,8,16]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 10 || cpu_reps < 1 || std::any_of(threads.begin(), threads.end(), [](int t) { return t < 1; })) {
    std::fprintf(stderr, "--reps must be at least 10, --cpu-reps at least 1, thread counts positive\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    return Fcn(reps, cpu_reps, threads).run(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_fcn: %s\n", e.what());
    return 1;
  }
}
