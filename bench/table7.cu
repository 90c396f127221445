// Seconds per mini-batch of the networks of Shi et al.'s Table 7 beside FCN-S (bench/fcn.cu)
// on one GPU: FCN-R, AlexNet-R, ResNet-56, the LSTM (examples/table7.hpp), AlexNet-S and
// ResNet-50 (examples/table7_imagenet.hpp). bench/peers_table7.py runs the same in PyTorch (eager,
// torch.compile, and the eager step captured in a CUDA graph).
//
//   a mini-batch   zero_grad(), logits = model(x), cross_entropy(logits, labels), backward,
//                  SGD step; x normal and labels uniform, made once on the device (synthetic
//                  data, as dlbench times the step and not the loading). The LSTM: token ids
//                  [32, 128] uniform in 10000, labels likewise, zero initial states, and
//                  clip_grad_norm_ to 5 before the step.
//   eager          the step as a program writes it: every kernel launched from the host.
//   graph          the same step captured once with et::capture (the warm-up step first)
//                  and replayed: one launch per mini-batch.
//   precision      float32 everywhere; convolutions may use TF32 (etensor's and PyTorch's
//                  default for cuDNN), matrix products do not (both defaults).
// Check: the losses of 3 eager steps and of 3 graph replays (both after the same eager
// warm-up step) are finite, and the first of each agree within 1e-3 (relative). Later
// losses are printed, not compared: cuDNN's convolution gradients add in an order that
// varies from run to run (its nondeterministic algorithms, PyTorch's default too), and
// training on one batch of 16 amplifies that: two eager runs of ResNet-50 differ by 1.5%
// at the third step (H200, 2026-11-28). The learning rate is 0.01 everywhere (the time does
// not depend on it; at 0.1 the ResNets' losses on one random batch diverge).
// Timing: a CUDA event pair around every step after 3 warm-up steps, median.
//
// Usage: et_bench_table7 [--json PATH] [--reps N] [--only NAME,NAME]
#include "../examples/table7_imagenet.hpp"

#include "common.cuh"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

struct Row {
  std::string network, size, mode;
  double etensor_us = 0;
  bool ok = true;
};

struct Options {
  double lr, momentum = 0, weight_decay = 0;
  double clip = 0;  ///< clip_grad_norm_ to this total norm before each step (0: none)
};

/// `count` class labels, uniform in [0, classes).
et::Tensor<std::int64_t, 1, Gpu> random_labels(std::int64_t count, std::int64_t classes, std::uint64_t seed) {
  return et::eval(et::cast<std::int64_t>(
      et::minimum(et::rand<float>(et::cuda<0>, {count}, seed) * float(classes), float(classes - 1))));
}

/// Times the training step of `model` on the batch x (eager and captured) and checks that
/// both give the same losses.
template <class Model, class X>
void measure(std::vector<Row>& rows, const std::string& name, const std::string& size, Model make_model, const X& x,
             const et::Tensor<std::int64_t, 1, Gpu>& labels, Options o, int reps) {
  auto run = [&](bool captured, std::vector<float>& losses) {
    auto model = make_model();
    et::optim::SGD opt(model.parameters(), {.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
    et::Tensor<float, 0, Gpu> loss;
    auto step = [&] {
      opt.zero_grad();
      loss = et::nn::cross_entropy(model(x), labels);
      loss.backward();
      if (o.clip > 0) et::nn::clip_grad_norm_(model.parameters(), o.clip);
      opt.step();
    };
    const auto s = et::Stream<Gpu>::create();
    et::StreamGuard guard(s);
    step();  // warm-up: the optimizer's state, the gradients, the libraries' plans exist
    double us = 0;
    if (!captured) {
      for (int k = 0; k < 3; ++k) step(), losses.push_back(loss.item());
      us = bench::median_us(step, 3, reps);
    } else {
      const auto graph = et::capture(s, step);
      for (int k = 0; k < 3; ++k) graph.replay(), losses.push_back(loss.item());
      us = bench::median_us([&] { graph.replay(); }, 3, reps);
    }
    return us;
  };
  std::vector<float> eager_losses, graph_losses;
  const double eager = run(false, eager_losses), graph = run(true, graph_losses);
  bool ok = std::abs(graph_losses[0] - eager_losses[0]) <= 1e-3 * std::abs(eager_losses[0]);
  for (std::size_t k = 0; k < eager_losses.size(); ++k)
    ok = ok && std::isfinite(eager_losses[k]) && std::isfinite(graph_losses[k]);
  std::printf("%-10s %-11s eager %9.3f ms   graph %9.3f ms   losses %.5f %.5f %.5f (graph %.5f %.5f %.5f)%s\n",
              name.c_str(), size.c_str(), eager / 1e3, graph / 1e3, eager_losses[0], eager_losses[1], eager_losses[2],
              graph_losses[0], graph_losses[1], graph_losses[2],
              ok ? "" : "   CHECK FAILED (first losses differ by more than 1e-3, or a loss is not finite)");
  std::fflush(stdout);
  rows.push_back({name, size, "eager", eager, ok});
  rows.push_back({name, size, "graph", graph, ok});
}

int write_json(const std::string& path, const std::vector<Row>& rows) {
  bool ok = true;
  for (const Row& r : rows) ok = ok && r.ok;
  std::printf("\n%s\n", ok ? "PASS: eager and captured steps agree" : "FAIL: a check failed (see above)");
  if (path.empty()) return ok ? 0 : 1;
  std::ofstream out(path);
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  using bench::json_string;
  out << "{\n  \"benchmark\": \"table7\",\n  \"device\": " << json_string(et::device_properties(0).name)
      << ",\n  \"ok\": " << (ok ? "true" : "false") << ",\n  \"results\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << "    {\"workload\": " << json_string(r.network + " " + r.mode) << ", \"size\": " << json_string(r.size)
        << ", \"etensor_us\": " << r.etensor_us << ", \"ok\": " << (r.ok ? "true" : "false") << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  std::printf("wrote %s\n", path.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--only fcn-r,alexnet-r,resnet-56,alexnet-s,resnet-50,lstm]\n",
                   argv[0]);
      return 2;
    }
  }
  if (reps < 5) {
    std::fprintf(stderr, "--reps must be at least 5\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  auto wanted = [&](const std::string& name) { return only.empty() || ("," + only + ",").find("," + name + ",") != std::string::npos; };
  try {
    std::printf("device: %s\n", et::device_properties(0).name.c_str());
    std::vector<Row> rows;
    const Gpu dev{};
    // An image network on a batch of `shape` with `classes` labels.
    auto images = [&]<std::size_t R>(const char* name, auto make, std::array<std::int64_t, R> shape,
                                     std::int64_t classes, Options o) {
      measure(rows, name, "batch " + std::to_string(shape[0]), make, et::randn<float>(et::cuda<0>, shape, 7),
              random_labels(shape[0], classes, 8), o, reps);
    };
    if (wanted("fcn-r"))
      images("FCN-R", [&] { return table7::fcn_r<float>(dev); }, std::array<std::int64_t, 2>{1024, 784}, 10,
             {.lr = 0.01});
    if (wanted("alexnet-r"))
      images("AlexNet-R", [&] { return table7::alexnet_r<float>(dev); }, std::array<std::int64_t, 4>{1024, 3, 32, 32},
             10, {.lr = 0.01, .momentum = 0.9});
    for (const std::int64_t batch : {128, 1024})
      if (wanted("resnet-56"))
        images("ResNet-56", [&] { return table7::ResNet56<float, Gpu>(dev); },
               std::array<std::int64_t, 4>{batch, 3, 32, 32}, 10, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
    if (wanted("alexnet-s"))
      images("AlexNet-S", [&] { return table7::alexnet_s<float>(dev); }, std::array<std::int64_t, 4>{16, 3, 224, 224},
             1000, {.lr = 0.01, .momentum = 0.9});
    if (wanted("resnet-50"))
      images("ResNet-50", [&] { return table7::ResNet50<float, Gpu>(dev); },
             std::array<std::int64_t, 4>{16, 3, 224, 224}, 1000, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
    if (wanted("lstm")) {
      // 32 steps of 128 sequences: token ids in, the next ids as the labels of every step.
      const std::int64_t steps = 32, batch = 128, vocabulary = 10000;
      const auto tokens = random_labels(steps * batch, vocabulary, 9).reshape({steps, batch});
      measure(rows, "LSTM", "batch 128", [&] { return table7::LstmLm<float, Gpu>(dev); }, tokens,
              random_labels(steps * batch, vocabulary, 10), {.lr = 0.01, .clip = 5.0}, reps);
    }
    return write_json(json_path, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_table7: %s\n", e.what());
    return 1;
  }
}
