// Seconds per mini-batch of the networks of Shi et al.'s Table 7 beside FCN-S (bench/fcn.cu)
// on one GPU: FCN-R, AlexNet-R, ResNet-56, the LSTM (examples/table7.hpp), AlexNet-S and
// ResNet-50 (examples/table7_imagenet.hpp); in bf16 and f16 also FCN-S (examples/fcn_s.hpp,
// batch 64). bench/peers_table7.py runs the same in PyTorch (eager,
// torch.compile, and the eager step captured in a CUDA graph).
//
//   a mini-batch   zero_grad(true) (the gradients dropped, as PyTorch's default set_to_none and
//                  bench/fcn.cu; zeroed in place before 2026-12-01 late), logits = model(x),
//                  cross_entropy(logits, labels), backward,
//                  SGD step; x normal and labels uniform, made once on the device (synthetic
//                  data, as dlbench times the step and not the loading). The LSTM: token ids
//                  [32, 128] uniform in 10000, labels likewise, zero initial states, and
//                  clip_grad_norm_ to 5 before the step.
//   eager          the step as a program writes it: every kernel launched from the host.
//   graph          the same step captured once with et::capture (the warm-up step first)
//                  and replayed: one launch per mini-batch.
//   precision      fp32: float32, convolutions allowed TF32 (etensor's and PyTorch's default
//                  for cuDNN), matrix products and the LSTM not (both defaults, PyTorch's
//                  LSTM set to match); tf32: TF32 allowed everywhere (et::MathModeGuard of
//                  MathMode::tf32 around the step; PyTorch's allow_tf32 flags), the rows
//                  named "... tf32"; bf16 and f16: mixed precision (et::amp), the rows "... bf16"
//                  and "... f16": the input cast to the 16-bit type and the forward and loss
//                  under et::amp::Autocast of it (float parameters; PyTorch: torch.autocast);
//                  f16 also scales the loss with et::amp::GradScaler (PyTorch's GradScaler,
//                  whose step() reads the overflow flag on the host). The LSTM's embeddings are
//                  cast to the 16-bit type, as PyTorch's autocast casts the LSTM's input.
// Check: the losses of 3 eager steps and of 3 graph replays (both after the same eager
// warm-up step) are finite, and the first of each agree within 1e-3 (relative; 1e-2 in bf16
// and f16, whose weights' 16-bit copies round the warm-up step's nondeterministic gradient
// sums further apart: ResNet-50's first bf16 losses differed by 0.3%, H200, 2026-12-01). Later
// losses are printed, not compared: cuDNN's convolution gradients add in an order that
// varies from run to run (its nondeterministic algorithms, PyTorch's default too), and
// training on one batch of 16 amplifies that: two eager runs of ResNet-50 differ by 1.5%
// at the third step (H200, 2026-11-28). The learning rate is 0.01 everywhere (the time does
// not depend on it; at 0.1 the ResNets' losses on one random batch diverge).
// Timing: a CUDA event pair around every step after 3 warm-up steps, median.
// Where the time goes: one more step of each (eager, graph) under CUPTI's activity records
// (tests/gpu/cupti_counter.hpp): the time the GPU ran kernels of the vendor libraries
// (cuBLAS, cuDNN: every kernel outside etensor's namespace) and etensor's own (et::kernels),
// and the time it ran none between the step's first kernel and its last (launch gaps, the
// host's time). These are taken after every row's timing: CUPTI, once started, slows the
// host's later launches (ResNet-56's eager step at batch 128: 8.6 ms before, 12.3 ms after).
// Tracing slows a step a little; the split is of that traced step. --no-trace leaves it out.
//
// Usage: et_bench_table7 [--json PATH] [--reps N] [--only NAME,NAME] [--precisions fp32,tf32,bf16,f16] [--no-trace]
#include "../examples/fcn_s.hpp"
#include "../examples/table7_imagenet.hpp"

#include "../tests/gpu/cupti_counter.hpp"
#include "common.cuh"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

/// Where one traced step's time went (see the file comment), in microseconds; `families`:
/// the kernels' time by function (up to two names of a mangled name, or the name itself),
/// longest first.
struct Breakdown {
  double span = 0, vendor = 0, etensor = 0, idle = 0;
  std::size_t vendor_kernels = 0, etensor_kernels = 0;
  std::vector<std::pair<double, std::string>> families;
};

/// "et::kernels::batch_norm_apply" from "_ZN2et7kernels16batch_norm_applyILi4EfEEv...", or a
/// vendor kernel's name up to its first 48 characters where it is not mangled that way.
std::string kernel_family(const std::string& name) {
  std::size_t at = name.rfind("_Z", 0) == 0 ? 2 : std::string::npos;
  if (at == std::string::npos) return name.substr(0, 48);
  if (at < name.size() && name[at] == 'N') ++at;
  std::string out;
  for (int part = 0; part < 3 && at < name.size() && std::isdigit(static_cast<unsigned char>(name[at])); ++part) {
    std::size_t length = 0;
    while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) length = 10 * length + (name[at++] - '0');
    out += (out.empty() ? "" : "::") + name.substr(at, length);
    at += length;
  }
  return out.empty() ? name.substr(0, 48) : out;
}

struct Row {
  std::string network, size, mode;
  double etensor_us = 0;
  bool ok = true;
  Breakdown split;
};

/// The time covered by the union of `spans` (nanoseconds), sorted in place.
double covered_us(std::vector<std::pair<std::uint64_t, std::uint64_t>>& spans) {
  std::sort(spans.begin(), spans.end());
  std::uint64_t busy = 0, reach = 0;
  for (const auto& [start, end] : spans) {
    if (end > reach) busy += end - std::max(start, reach), reach = end;
  }
  return double(busy) / 1e3;
}

/// One run of `step` under CUPTI: the time the GPU ran the vendor libraries' kernels and
/// etensor's (each the union of their intervals: a library's kernels may run side by side,
/// cuDNN's LSTM on several streams), and the time it ran none.
template <class Step>
Breakdown breakdown(Step&& step) {
  test::LaunchCounter counter;
  step();
  const test::Launches seen = counter.stop();
  Breakdown b;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> vendor, etensor, all = seen.kernel_spans;
  for (std::size_t k = 0; k < all.size(); ++k) {
    // etensor's kernels are in namespace et::kernels (mangled "N2et7kernels")
    const bool own = seen.kernel_names[k].find("2et7kernels") != std::string::npos;
    (own ? etensor : vendor).push_back(all[k]);
  }
  if (all.empty()) return b;
  std::map<std::string, double> by_family;
  for (std::size_t k = 0; k < all.size(); ++k)
    by_family[kernel_family(seen.kernel_names[k])] += double(all[k].second - all[k].first) / 1e3;
  for (const auto& [family, us] : by_family) b.families.emplace_back(us, family);
  std::sort(b.families.rbegin(), b.families.rend());
  b.vendor = covered_us(vendor);
  b.etensor = covered_us(etensor);
  b.vendor_kernels = vendor.size();
  b.etensor_kernels = etensor.size();
  const double busy = covered_us(all);  // sorts by start
  std::uint64_t last_end = 0;
  for (const auto& span : all) last_end = std::max(last_end, span.second);
  b.span = double(last_end - all.front().first) / 1e3;
  b.idle = b.span - busy;
  return b;
}

/// The split of a traced step, and with `families` its six longest kernel functions.
void print_breakdown(const char* mode, const Breakdown& b, bool families) {
  std::printf("           %-5s traced step %8.3f ms: vendor kernels ran %8.3f ms (%3.0f%%, %zu), etensor's %7.3f ms "
              "(%3.0f%%, %zu), none %7.3f ms (%3.0f%%)\n",
              mode, b.span / 1e3, b.vendor / 1e3, 100 * b.vendor / b.span, b.vendor_kernels, b.etensor / 1e3,
              100 * b.etensor / b.span, b.etensor_kernels, b.idle / 1e3, 100 * b.idle / b.span);
  for (std::size_t k = 0; families && k < std::min<std::size_t>(6, b.families.size()); ++k)
    std::printf("             %8.3f ms  %s\n", b.families[k].first / 1e3, b.families[k].second.c_str());
}

struct Options {
  double lr, momentum = 0, weight_decay = 0;
  double clip = 0;  ///< clip_grad_norm_ to this total norm before each step (0: none)
};

/// `count` class labels, uniform in [0, classes).
et::Tensor<std::int64_t, 1, Gpu> random_labels(std::int64_t count, std::int64_t classes, std::uint64_t seed) {
  return et::eval(et::cast<std::int64_t>(
      et::minimum(et::rand<float>(et::cuda<0>, {count}, seed) * float(classes), float(classes - 1))));
}

enum class Precision { fp32, tf32, bf16, f16 };
const char* precision_name(Precision p) {
  return p == Precision::tf32 ? "tf32" : p == Precision::bf16 ? "bf16" : p == Precision::f16 ? "f16" : "fp32";
}

/// What a pass over the rows does: time every step, or, after all the timings (CUPTI, once
/// started, slows every later launch from the host), trace one step of each.
enum class Pass { time, trace };

/// Pass::time: times the training step of `model` on the batch x (eager and captured),
/// checks that both give the same losses and adds the two rows. Pass::trace: adds to those
/// rows where one traced step of each went.
template <class Model, class X>
void measure(std::vector<Row>& rows, Pass pass, const std::string& name, const std::string& size, Model make_model,
             const X& x, const et::Tensor<std::int64_t, 1, Gpu>& labels, Options o, int reps, Precision p) {
  Breakdown split[2];
  auto run = [&](bool captured, std::vector<float>& losses) {
    const et::MathModeGuard precision(p == Precision::tf32 ? et::MathMode::tf32 : et::MathMode::exact);
    auto model = make_model();
    et::optim::SGD opt(model.parameters(), {.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
    et::amp::GradScaler<Gpu> scaler(et::cuda<0>, {.enabled = p == Precision::f16});
    et::Tensor<float, 0, Gpu> loss;
    // The forward and the loss in the 16-bit type L: the input cast once, the layers under the guard.
    auto low_forward = [&]<class L>(L) {
      et::amp::Autocast<L> autocast;
      if constexpr (et::detail::is_floating_v<typename X::value_type>)
        loss = et::nn::cross_entropy(model(et::Tensor<L, X::rank, Gpu>(et::cast<L>(x))), labels);
      else  // the LSTM: token ids in, its embeddings cast to L
        loss = et::nn::cross_entropy(model.template forward<L>(x), labels);
    };
    auto step = [&] {
      opt.zero_grad(/*set_to_none=*/true);  // as the peers (PyTorch's default) and bench/fcn.cu
      if (p == Precision::bf16) low_forward(et::bfloat16{});
      else if (p == Precision::f16) low_forward(et::half{});
      else loss = et::nn::cross_entropy(model(x), labels);
      scaler.scale(loss).backward();
      if (o.clip > 0) {
        scaler.unscale_(opt);
        et::nn::clip_grad_norm_(model.parameters(), o.clip);
      }
      scaler.step(opt);
      scaler.update();
    };
    // The step's own stream (et::capture records a stream other than the default one), after
    // the work queued so far on the default stream: the model's initialization, x and the
    // labels. A stream made by Stream::create() is not ordered with the default stream by
    // itself; without the wait, a step could read weights still being written (seen on
    // AlexNet-S, 2026-12-01: its first loss 0.3% off in one of two runs).
    const auto s = et::Stream<Gpu>::create();
    et::Event<Gpu> made;
    made.record();
    s.wait(made);
    et::StreamGuard guard(s);
    step();  // warm-up: the optimizer's state, the gradients, the libraries' plans exist
    double us = 0;
    if (!captured) {
      for (int k = 0; k < 3; ++k) step(), losses.push_back(loss.item());
      if (pass == Pass::time) us = bench::median_us(step, 3, reps);
      else split[0] = breakdown(step);
    } else {
      const auto graph = et::capture(s, step);
      for (int k = 0; k < 3; ++k) graph.replay(), losses.push_back(loss.item());
      if (pass == Pass::time) us = bench::median_us([&] { graph.replay(); }, 3, reps);
      else split[1] = breakdown([&] { graph.replay(); });
    }
    return us;
  };
  std::vector<float> eager_losses, graph_losses;
  const double eager = run(false, eager_losses), graph = run(true, graph_losses);
  const std::string precision = precision_name(p);
  if (pass == Pass::trace) {
    std::printf("%-10s %-11s %s\n", name.c_str(), size.c_str(), precision.c_str());
    print_breakdown("eager", split[0], false);
    print_breakdown("graph", split[1], true);
    std::fflush(stdout);
    const std::string suffix = p == Precision::fp32 ? "" : " " + precision;
    for (Row& r : rows) {
      if (r.network != name || r.size != size) continue;
      if (r.mode == "eager" + suffix) r.split = split[0];
      if (r.mode == "graph" + suffix) r.split = split[1];
    }
    return;
  }
  const double agree = p == Precision::bf16 || p == Precision::f16 ? 1e-2 : 1e-3;
  bool ok = std::abs(graph_losses[0] - eager_losses[0]) <= agree * std::abs(eager_losses[0]);
  for (std::size_t k = 0; k < eager_losses.size(); ++k)
    ok = ok && std::isfinite(eager_losses[k]) && std::isfinite(graph_losses[k]);
  std::printf("%-10s %-11s %s eager %9.3f ms   graph %9.3f ms   losses %.5f %.5f %.5f (graph %.5f %.5f %.5f)%s\n",
              name.c_str(), size.c_str(), precision.c_str(), eager / 1e3, graph / 1e3, eager_losses[0],
              eager_losses[1], eager_losses[2], graph_losses[0], graph_losses[1], graph_losses[2],
              ok ? "" : "   CHECK FAILED (the first losses differ by more than the tolerance, or a loss is not finite)");
  std::fflush(stdout);
  const std::string suffix = p == Precision::fp32 ? "" : " " + precision;
  rows.push_back({name, size, "eager" + suffix, eager, ok, {}});
  rows.push_back({name, size, "graph" + suffix, graph, ok, {}});
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
        << ", \"etensor_us\": " << r.etensor_us << ", \"traced_us\": " << r.split.span
        << ", \"vendor_us\": " << r.split.vendor << ", \"vendor_kernels\": " << r.split.vendor_kernels
        << ", \"etensor_kernels_us\": " << r.split.etensor << ", \"etensor_kernels\": " << r.split.etensor_kernels
        << ", \"idle_us\": " << r.split.idle << ", \"ok\": " << (r.ok ? "true" : "false") << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  std::printf("wrote %s\n", path.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only, precisions = "fp32,tf32";
  int reps = 20;
  bool trace = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else if (arg == "--precisions" && i + 1 < argc) precisions = argv[++i];
    else if (arg == "--no-trace") trace = false;
    else {
      std::fprintf(stderr,
                   "usage: %s [--json PATH] [--reps N] [--only fcn-s,fcn-r,alexnet-r,resnet-56,alexnet-s,resnet-50,lstm] "
                   "[--precisions fp32,tf32,bf16,f16] [--no-trace]\n",
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
    auto every_row = [&](Pass pass) {
      for (const Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::f16}) {
        if (("," + precisions + ",").find("," + std::string(precision_name(p)) + ",") == std::string::npos) continue;
        // An image network on a batch of `shape` with `classes` labels.
        auto images = [&]<std::size_t R>(const char* name, auto make, std::array<std::int64_t, R> shape,
                                         std::int64_t classes, Options o) {
          measure(rows, pass, name, "batch " + std::to_string(shape[0]), make, et::randn<float>(et::cuda<0>, shape, 7),
                  random_labels(shape[0], classes, 8), o, reps, p);
        };
        // FCN-S in the 16-bit precisions (its fp32 and tf32 rows are bench/fcn.cu's).
        if (wanted("fcn-s") && (p == Precision::bf16 || p == Precision::f16))
          images("FCN-S", [&] { return fcn::make_model(dev, fcn::Sizes{}); }, std::array<std::int64_t, 2>{64, 26752},
                 26752, {.lr = 0.01});
        if (wanted("fcn-r"))
          images("FCN-R", [&] { return table7::fcn_r<float>(dev); }, std::array<std::int64_t, 2>{1024, 784}, 10,
                 {.lr = 0.01});
        if (wanted("alexnet-r"))
          images("AlexNet-R", [&] { return table7::alexnet_r<float>(dev); },
                 std::array<std::int64_t, 4>{1024, 3, 32, 32}, 10, {.lr = 0.01, .momentum = 0.9});
        for (const std::int64_t batch : {128, 1024})
          if (wanted("resnet-56"))
            images("ResNet-56", [&] { return table7::ResNet56<float, Gpu>(dev); },
                   std::array<std::int64_t, 4>{batch, 3, 32, 32}, 10,
                   {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
        if (wanted("alexnet-s"))
          images("AlexNet-S", [&] { return table7::alexnet_s<float>(dev); },
                 std::array<std::int64_t, 4>{16, 3, 224, 224}, 1000, {.lr = 0.01, .momentum = 0.9});
        // ResNet-50 also at batch 64 in bf16: compute-bound, the tensor cores' case.
        for (const std::int64_t batch : {16, 64})
          if (wanted("resnet-50") && (batch == 16 || p == Precision::bf16))
            images("ResNet-50", [&] { return table7::ResNet50<float, Gpu>(dev); },
                   std::array<std::int64_t, 4>{batch, 3, 224, 224}, 1000,
                   {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4});
        if (wanted("lstm")) {
          // 32 steps of 128 sequences: token ids in, the next ids as the labels of every step.
          const std::int64_t steps = 32, batch = 128, vocabulary = 10000;
          const auto tokens = random_labels(steps * batch, vocabulary, 9).reshape({steps, batch});
          measure(rows, pass, "LSTM", "batch 128", [&] { return table7::LstmLm<float, Gpu>(dev); }, tokens,
                  random_labels(steps * batch, vocabulary, 10), {.lr = 0.01, .clip = 5.0}, reps, p);
        }
      }
    };
    every_row(Pass::time);
    if (trace) {
      std::printf("\nwhere each step's time goes (one traced step of each, after every timing):\n");
      every_row(Pass::trace);
    }
    return write_json(json_path, rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_table7: %s\n", e.what());
    return 1;
  }
}
