// Seconds per mini-batch of Shi et al.'s Table 7 networks on the CPU, the table's CPU
// columns: FCN-S (examples/fcn_s.hpp), FCN-R, AlexNet-R, ResNet-56, the LSTM
// (examples/table7.hpp), AlexNet-S and ResNet-50 (examples/table7_imagenet.hpp), each at
// 1, 2, 4, 8 and 16 threads (et::set_num_threads: etensor's loops, the CBLAS and oneDNN);
// bench/peers_table7_cpu.py runs the same in PyTorch's CPU build at the same thread counts.
//
//   a mini-batch   as bench/table7.cu's fp32 eager step: zero_grad(true), logits = model(x),
//                  cross_entropy(logits, labels), backward, SGD step (the same learning
//                  rates, momenta and weight decays; the LSTM clips its gradients to 5);
//                  synthetic data made once, the table's batch sizes (ResNet-56 at 128).
// Plain C++ (g++ -O3 -march=x86-64-v3, not nvcc: the host code the users of the CPU compile),
// built where the CBLAS and oneDNN were configured (the first line says which).
// Check: each network's first loss at every thread count is finite and within 1e-3
// (relative) of its loss at the first thread count (the sums' order changes with the threads).
// Timing: steady_clock around every step after one warm-up step (ending with loss.item()),
// median of --reps.
//
// Usage: et_bench_table7_cpu [--json PATH] [--reps N] [--threads 1,2,4,8,16] [--only NAME,NAME]
#include "../examples/fcn_s.hpp"
#include "../examples/table7_imagenet.hpp"
#include "host_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <omp.h>

namespace {

using Cpu = et::Cpu;

struct Options {
  double lr, momentum = 0, weight_decay = 0, clip = 0;
};

struct Row {
  std::string network, size;
  int threads = 0;
  double us = 0;
  float first_loss = 0;
  bool ok = true;
};

et::Tensor<std::int64_t, 1, Cpu> random_labels(std::int64_t count, std::int64_t classes, std::uint64_t seed) {
  return et::eval(et::cast<std::int64_t>(
      et::minimum(et::rand<float>(et::cpu, {count}, seed) * float(classes), float(classes - 1))));
}

/// Times the training step of a fresh `make()` on (x, labels) at `threads` threads.
template <class Make, class X>
Row measure(const std::string& name, const std::string& size, Make make, const X& x,
            const et::Tensor<std::int64_t, 1, Cpu>& labels, Options o, int threads, int reps) {
  et::set_num_threads(threads);
  auto model = make();
  et::optim::SGD opt(model.parameters(), {.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  auto step = [&] {
    opt.zero_grad(/*set_to_none=*/true);
    auto loss = et::nn::cross_entropy(model(x), labels);
    loss.backward();
    if (o.clip > 0) et::nn::clip_grad_norm_(model.parameters(), o.clip);
    opt.step();
    return loss.item();
  };
  Row r{name, size, threads};
  r.first_loss = step();  // warm-up: the gradients, the optimizer's state, the libraries' primitives
  std::vector<double> times;
  for (int k = 0; k < reps; ++k) {
    const auto start = std::chrono::steady_clock::now();
    const float loss = step();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    r.ok = r.ok && std::isfinite(loss);
  }
  r.us = bench::median(times);
  r.ok = r.ok && std::isfinite(r.first_loss);
  std::printf("%-10s %-10s %2d thread%s %10.1f ms   first loss %.5f%s\n", name.c_str(), size.c_str(), threads,
              threads == 1 ? " " : "s", r.us / 1e3, r.first_loss, r.ok ? "" : "   CHECK FAILED (a loss is not finite)");
  std::fflush(stdout);
  return r;
}

const char* cpu_libraries() {
#if defined(ET_CBLAS_OPENBLAS)
  static const std::string name = std::string("products: OpenBLAS (") + OPENBLAS_VERSION + ", core " + openblas_get_corename() + ")";
  return name.c_str();
#elif defined(ET_WITH_CBLAS)
  return "products: a CBLAS";
#else
  return "products: Eigen";
#endif
}

const char* convolution_library() {
#if defined(ET_WITH_DNNL)
  return "oneDNN";
#else
  return "im2col + the products' GEMM";
#endif
}

/// The rows so far (written after every row: a run cut short keeps what it measured).
void write_json(const std::string& path, int cores, const std::vector<Row>& rows, bool ok) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << "{\"benchmark\": \"table7-cpu\", \"cores\": " << cores << ", \"libraries\": \"" << cpu_libraries() << "; "
      << convolution_library() << "\", \"ok\": " << (ok ? "true" : "false") << ", \"results\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i ? ", " : "") << "{\"workload\": \"" << r.network << " cpu " << r.threads << "t\", \"size\": \"" << r.size
        << "\", \"threads\": " << r.threads << ", \"etensor_us\": " << r.us << ", \"first_loss\": " << r.first_loss
        << ", \"ok\": " << (r.ok ? "true" : "false") << "}";
  }
  out << "]}\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only;
  int reps = 2;
  std::vector<int> threads{1, 2, 4, 8, 16};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = bench::thread_counts(argv[++i]);
      for (int& t : threads) t = std::max(1, t);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--threads 1,2,4,8,16] [--only "
                   "fcn-s,fcn-r,alexnet-r,resnet-56,alexnet-s,resnet-50,lstm]\n", argv[0]);
      return 2;
    }
  }
  auto wanted = [&](const char* key) { return only.empty() || ("," + only + ",").find(std::string(",") + key + ",") != std::string::npos; };
  const int cores = omp_get_num_procs();
  std::printf("Table 7 on the CPU (%d cores; %s; convolutions: %s), median of %d steps after one\n\n", cores,
              cpu_libraries(), convolution_library(), reps);
  std::vector<Row> rows;
  try {
    const auto dev = et::cpu;
    // Every network at every thread count; its first loss at each count against the first count's.
    auto sweep = [&](const char* key, const char* name, auto make, const auto& x, const auto& labels, Options o) {
      if (!wanted(key)) return;
      const std::size_t first = rows.size();
      const std::string size = "batch " + std::to_string(x.shape()[key == std::string("lstm") ? 1 : 0]);
      for (const int t : threads) {
        if (t > cores) {
          std::printf("%-10s %-10s %2d threads   skipped: %d cores\n", name, size.c_str(), t, cores);
          continue;
        }
        Row r = measure(name, size, make, x, labels, o, t, reps);
        if (rows.size() > first)
          r.ok = r.ok && std::abs(r.first_loss - rows[first].first_loss) <= 1e-3 * std::abs(rows[first].first_loss);
        rows.push_back(r);
        write_json(json_path, cores, rows, false);
      }
    };
    sweep("fcn-s", "FCN-S", [&] { return fcn::make_model(dev, fcn::Sizes{}); }, et::randn<float>(dev, {64, 26752}, 7),
          random_labels(64, 26752, 8), {.lr = 0.01});
    sweep("fcn-r", "FCN-R", [&] { return table7::fcn_r<float>(dev); }, et::randn<float>(dev, {1024, 784}, 7),
          random_labels(1024, 10, 8), {.lr = 0.01});
    sweep("alexnet-r", "AlexNet-R", [&] { return table7::alexnet_r<float>(dev); },
          et::randn<float>(dev, {1024, 3, 32, 32}, 7), random_labels(1024, 10, 8), {.lr = 0.01, .momentum = 0.9});
    sweep("resnet-56", "ResNet-56", [&] { return table7::ResNet56<float, Cpu>(dev); },
          et::randn<float>(dev, {128, 3, 32, 32}, 7), random_labels(128, 10, 8),
          {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
    sweep("alexnet-s", "AlexNet-S", [&] { return table7::alexnet_s<float>(dev); },
          et::randn<float>(dev, {16, 3, 224, 224}, 7), random_labels(16, 1000, 8), {.lr = 0.01, .momentum = 0.9});
    sweep("resnet-50", "ResNet-50", [&] { return table7::ResNet50<float, Cpu>(dev); },
          et::randn<float>(dev, {16, 3, 224, 224}, 7), random_labels(16, 1000, 8),
          {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
    const std::int64_t steps = 32, batch = 128, vocabulary = 10000;
    sweep("lstm", "LSTM", [&] { return table7::LstmLm<float, Cpu>(dev); },
          random_labels(steps * batch, vocabulary, 9).reshape({steps, batch}),
          random_labels(steps * batch, vocabulary, 10), {.lr = 0.01, .clip = 5.0});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_table7_cpu: %s\n", e.what());
    return 1;
  }
  et::set_num_threads(cores);
  bool ok = true;
  for (const Row& r : rows) ok = ok && r.ok;
  std::printf("\n%s\n", ok ? "PASS: every loss finite, the first losses agree across thread counts" : "FAIL: see above");
  write_json(json_path, cores, rows, ok);
  return ok ? 0 : 1;
}
