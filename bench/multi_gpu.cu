// Several GPUs (et/dist.hpp): NCCL collectives through et::dist beside NCCL called directly,
// and FCN-S (examples/fcn_s.hpp, fp32, 64 rows per GPU) trained on several GPUs beside the
// same step on one GPU. Two modes, as the work is laid out:
//
//   et_bench_multi_gpu one-process [--json PATH] [--reps N]
//       one process seeing every GPU: FCN-S on GPU 0 alone (64 rows), then et::nn::DataParallel
//       over every GPU seen (64 rows each), with dp.optimizer<SGD> (every replica steps) and
//       with an SGD of the module alone (the replicas copied from GPU 0 at each forward).
//   mpirun -np N et_bench_multi_gpu ranks [--json PATH] [--reps N]
//       a process per GPU: et::dist::all_reduce of 1, 16 and 256 MB of floats (with the
//       default shape check across ranks, and without) beside ncclAllReduce on the same
//       communicator; FCN-S alone on each rank's GPU, then with DistributedDataParallel, at
//       64 and at 512 rows a rank (at 64 also with the communication stream at normal
//       priority), beside one all-reduce of every gradient (how much of it the backward
//       hides); DDP and ShardedDataParallel (ZeRO stage 1) with Adam.
//
// Limits: an all-reduce's is NCCL's own call on the same data ("nccl direct"), and bus
// bandwidth is reported as nccl-tests does (bytes * 2 (n - 1) / n / time). A multi-GPU
// step's limit is the one-GPU step ("1 GPU step"): n GPUs doing n times the work in the
// time one does its share; the scaling in the note is n * t(1 GPU) / t(n GPUs).
// Check: the first losses of DataParallel and of DDP against the one-GPU step on the whole
// batch (relative 1e-4), and the all-reduce's sum against its expected value.
// Timing: CUDA events on GPU 0 (each rank's GPU) around batches of back-to-back steps after
// a second of warm-up, median.
#include "../examples/fcn_s.hpp"

#include "common.cuh"

#include <et/dist.hpp>

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
  std::string workload, size;
  double etensor_us = 0, limit_us = 0;
  std::string limit_kind, note;
  bool ok = true;
};

int write_json(const std::string& path, const std::vector<Row>& rows) {
  bool ok = true;
  for (const Row& r : rows) {
    ok = ok && r.ok;
    std::printf("%-34s %-22s %10.1f us  limit %10.1f us (%s)  %s%s\n", r.workload.c_str(), r.size.c_str(),
                r.etensor_us, r.limit_us, r.limit_kind.c_str(), r.note.c_str(), r.ok ? "" : "  CHECK FAILED");
  }
  if (path.empty()) return ok ? 0 : 1;
  std::ofstream out(path);
  out << "{\n  \"device\": " << bench::json_string(et::device_properties(0).name) << ",\n  \"results\": [\n";
  for (std::size_t i = 0; i != rows.size(); ++i) {
    const Row& r = rows[i];
    out << "    {\"workload\": " << bench::json_string(r.workload) << ", \"size\": " << bench::json_string(r.size)
        << ", \"etensor_us\": " << r.etensor_us << ", \"limit_us\": " << r.limit_us
        << ", \"limit_kind\": " << bench::json_string(r.limit_kind) << ", \"ok\": " << (r.ok ? "true" : "false")
        << ", \"note\": " << bench::json_string(r.note) << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  std::printf("wrote %s\n", path.c_str());
  return ok ? 0 : 1;
}

std::string format(const char* pattern, double a, double b = 0) {
  char text[200];
  std::snprintf(text, sizeof text, pattern, a, b);
  return text;
}

/// Median microseconds per FCN-S step of `step()` (which returns the loss).
template <class Step>
double step_us(Step step, int reps) {
  return bench::steady_median_us([&] { (void)step(); }, 1.0, reps, 4);
}

/// Median microseconds per call of `launch` (timed in groups of `iters`) after a fixed
/// number of warm-up calls: every rank of a job must issue the same collectives, so no
/// rank may warm up for a time of its own (bench::steady_median_us).
template <class Launch>
double rank_median_us(Launch launch, int reps, int iters) {
  for (int i = 0; i < 3 * iters; ++i) launch();
  ET_CUDA_CHECK(cudaDeviceSynchronize());
  return bench::timed_median_us(launch, reps, iters);
}

/// Median microseconds the host takes to queue one step onto idle GPUs (every device
/// synchronized first): a step whose host time reaches its GPU time is bound by the host.
template <class Step>
double host_us(Step step, int reps) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    for (int d = et::device_count() - 1; d >= 0; --d) {
      ET_CUDA_CHECK(cudaSetDevice(d));
      ET_CUDA_CHECK(cudaDeviceSynchronize());
    }
    const auto start = std::chrono::steady_clock::now();
    (void)step();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return bench::median(times);
}

/// The batch of `parts` GPUs' 64 rows each, made on GPU 0.
fcn::Batch<Gpu> batch_of(std::int64_t parts) {
  fcn::Sizes sizes;
  sizes.batch = 64 * parts;
  return fcn::synthetic_batch(et::cuda<0>, sizes, 7);
}

bool close(double got, double want) { return std::abs(got - want) <= 1e-4 * std::abs(want); }

int one_process(const std::string& json, int reps) {
  std::vector<Row> rows;
  const fcn::Sizes sizes;
  auto single = fcn::make_model(et::cuda<0>, sizes);
  et::optim::SGD single_opt(single.parameters(), {.lr = 0.01});
  const auto one = batch_of(1);
  const double t1 = step_us([&] { return fcn::train_step(single, single_opt, one); }, reps);
  const double host1 = host_us([&] { return fcn::train_step(single, single_opt, one); }, reps);
  rows.push_back({"fcn-s fp32 step, 1 GPU", "64 rows", t1, 0, "", format("host queues a step in %.0f us", host1), true});
  et::with_visible_devices<8>([&](auto set) {
    const auto n = std::int64_t(set.size());
    const auto whole = batch_of(n);
    const std::string size = std::to_string(n) + " GPU x 64 rows";
    // The first loss on the whole batch, on one GPU, as the check.
    auto reference = fcn::make_model(et::cuda<0>, sizes);
    const double want = et::nn::cross_entropy(reference(whole.x), whole.labels).item();
    for (const bool replicated : {true, false}) {
      auto model = fcn::make_model(et::cuda<0>, sizes);
      et::nn::DataParallel dp(model, set);
      auto time_with = [&](auto& opt) {
        const double first = fcn::train_step(dp, opt, whole).item();
        const double us = step_us([&] { return fcn::train_step(dp, opt, whole); }, reps);
        const double host = host_us([&] { return fcn::train_step(dp, opt, whole); }, reps);
        const bool ok = close(first, want);
        rows.push_back({replicated ? "fcn-s fp32 DataParallel" : "fcn-s fp32 DataParallel, module's SGD", size, us,
                        t1, "1 GPU step",
                        format("scaling %.2fx of %.0f", double(n) * t1 / us, double(n)) +
                            format("; host queues a step in %.0f us", host) +
                            format("; first loss %.6f (1 GPU: %.6f)", first, want),
                        ok});
      };
      if (replicated) {
        auto opt = dp.template optimizer<et::optim::SGD>({.lr = 0.01});
        time_with(opt);
      } else {
        et::optim::SGD opt(dp.parameters(), {.lr = 0.01});
        time_with(opt);
      }
    }
  });
  return write_json(json, rows);
}

int ranks(const std::string& json, int reps) {
  const et::dist::ProcessGroup pg = et::dist::init();
  const et::dist::ProcessGroup unchecked = et::dist::init({.check_shapes = false, .select_device = false});
  const int n = pg.size();
  std::vector<Row> rows;
  const std::string group = std::to_string(n) + " rank" + (n > 1 ? "s" : "");
  for (const std::int64_t mb : {1, 16, 256}) {
    const std::int64_t count = mb * 1024 * 1024 / 4;
    auto t = et::full<float>(et::cuda<0>, {count}, 1.0f);
    auto run_et = [&] { et::dist::all_reduce(t, pg); };
    auto run_unchecked = [&] { et::dist::all_reduce(t, unchecked); };
    auto run_nccl = [&] {
      ET_NCCL_CHECK(ncclAllReduce(t.data(), t.data(), std::size_t(count), ncclFloat32, ncclSum, pg.native(),
                                  bench::stream()));
    };
    const double direct = rank_median_us(run_nccl, reps, 5);
    const double checked = rank_median_us(run_et, reps, 5);
    const double plain = rank_median_us(run_unchecked, reps, 5);
    // Sum check: ones summed over n ranks, many times: reset, one call, read.
    t = 1.0f;
    run_et();
    const bool ok = t.slice(0, 0, 1).item() == float(n);
    auto busbw = [&](double us) { return double(count) * 4 * 2 * (n - 1) / n / (us * 1e-6) / 1e9; };
    const std::string size = std::to_string(mb) + " MB, " + group;
    rows.push_back({"all_reduce, shapes checked", size, checked, direct, "nccl direct",
                    format("bus %.0f GB/s (NCCL direct %.0f GB/s)", busbw(checked), busbw(direct)), ok});
    rows.push_back({"all_reduce, check_shapes=false", size, plain, direct, "nccl direct",
                    format("bus %.0f GB/s (NCCL direct %.0f GB/s)", busbw(plain), busbw(direct)), ok});
  }
  // FCN-S's gradients (472 MB) against its compute: at 64 rows a rank the all-reduce takes
  // longer than the backward it should hide behind; at 512 rows the compute is 8 times more.
  for (const std::int64_t per_rank : {64, 512}) {
    fcn::Sizes sizes;
    sizes.batch = per_rank;
    const std::string rows_text = std::to_string(per_rank) + " rows";
    const auto mine = fcn::synthetic_batch(et::cuda<0>, sizes, 7 + std::uint64_t(pg.rank()));
    auto single = fcn::make_model(et::cuda<0>, sizes);
    et::optim::SGD single_opt(single.parameters(), {.lr = 0.01});
    const double t1 = rank_median_us([&] { (void)fcn::train_step(single, single_opt, mine); }, reps, 4);
    rows.push_back({"fcn-s fp32 step, 1 GPU of a rank", rows_text, t1, 0, "", "", true});
    // Every gradient in one all-reduce, alone: what the DDP step adds to t1 without overlap.
    std::int64_t gradient_numel = 0;
    for (const auto& p : single.parameters()) gradient_numel += p.numel();
    auto all_grads = et::full<float>(et::cuda<0>, {gradient_numel}, 1.0f);
    const double all_reduce = rank_median_us([&] { et::dist::all_reduce(all_grads, pg); }, reps, 2);
    all_grads = et::Tensor<float, 1, Gpu>();
    auto reference = fcn::make_model(et::cuda<0>, sizes);
    const double want = et::nn::cross_entropy(reference(mine.x), mine.labels).item();
    // The communication stream at the GPU's highest priority (the default), then at normal
    // priority (PyTorch DDP's), at 64 rows.
    for (const bool high : {true, false}) {
      if (!high && per_rank != 64) continue;
      auto model = fcn::make_model(et::cuda<0>, sizes);
      et::nn::DistributedDataParallel ddp(model, pg, {.high_priority_comm = high});
      et::optim::SGD opt(ddp.parameters(), {.lr = 0.01});
      const double first = fcn::train_step(ddp, opt, mine).item();  // this rank's loss, before any step
      const double us = rank_median_us([&] { (void)fcn::train_step(ddp, opt, mine); }, reps, 4);
      const double host = host_us([&] { return fcn::train_step(ddp, opt, mine); }, reps);
      // The step's time beyond the one-GPU step is the all-reduce's part left unhidden.
      const double exposed = us - t1;
      rows.push_back({high ? "fcn-s fp32 DDP" : "fcn-s fp32 DDP, comm stream normal priority",
                      group + " x " + rows_text, us, t1, "1 GPU step",
                      format("scaling %.2fx of %.0f", double(n) * t1 / us, double(n)) +
                          format("; %.0f us beyond 1 GPU of a %.0f us all-reduce of every gradient", exposed,
                                 all_reduce) +
                          format(" (%.0f%% hidden)", 100 * std::max(0.0, 1 - exposed / all_reduce)) +
                          format("; host queues a step in %.0f us", host) +
                          format("; first loss %.6f (1 GPU: %.6f)", first, want),
                      close(first, want)});
    }
  }
  // ZeRO stage 1 (ShardedDataParallel) against DDP, both with Adam, whose two moments the
  // shards split among the ranks.
  {
    const fcn::Sizes sizes;
    const auto mine = fcn::synthetic_batch(et::cuda<0>, sizes, 7 + std::uint64_t(pg.rank()));
    auto state_mb = [](const auto& params) {
      double n = 0;
      for (const auto& p : params) n += double(p.numel());
      return 2 * 4 * n / 1e6;  // m and v, float
    };
    auto ddp_model = fcn::make_model(et::cuda<0>, sizes);
    et::nn::DistributedDataParallel ddp(ddp_model, pg);
    et::optim::Adam ddp_opt(ddp.parameters(), {.lr = 1e-4});
    const double ddp_us = rank_median_us([&] { (void)fcn::train_step(ddp, ddp_opt, mine); }, reps, 4);
    rows.push_back({"fcn-s fp32 DDP, Adam", group + " x 64 rows", ddp_us, 0, "",
                    format("Adam state %.0f MB a GPU", state_mb(ddp.parameters())), true});
    auto zero_model = fcn::make_model(et::cuda<0>, sizes);
    et::nn::ShardedDataParallel sdp(zero_model, pg);
    et::optim::Adam zero_opt(sdp.parameters(), {.lr = 1e-4});
    const double first = fcn::train_step(sdp, zero_opt, mine).item();
    auto reference = fcn::make_model(et::cuda<0>, sizes);
    const double want = et::nn::cross_entropy(reference(mine.x), mine.labels).item();
    const double zero_us = rank_median_us([&] { (void)fcn::train_step(sdp, zero_opt, mine); }, reps, 4);
    rows.push_back({"fcn-s fp32 ShardedDataParallel, Adam", group + " x 64 rows", zero_us, ddp_us, "DDP Adam step",
                    format("%.2fx DDP's step", zero_us / ddp_us) +
                        format("; Adam state %.0f MB a GPU", state_mb(sdp.parameters())) +
                        format("; first loss %.6f (1 GPU: %.6f)", first, want),
                    close(first, want)});
  }
  const int status = pg.rank() == 0 ? write_json(json, rows) : 0;
  pg.exchange("");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "", json;
  int reps = 20;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else mode = "";
  }
  if ((mode != "one-process" && mode != "ranks") || reps < 5) {
    std::fprintf(stderr, "usage: %s one-process|ranks [--json PATH] [--reps N >= 5]\n", argv[0]);
    return 2;
  }
  try {
    return mode == "ranks" ? ranks(json, reps) : one_process(json, reps);
  } catch (const et::CudaError& e) {
    std::fprintf(stderr, "et_bench_multi_gpu needs a GPU (%s)\n", e.what());
    return 77;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_multi_gpu: %s\n", e.what());
    return 1;
  }
}
