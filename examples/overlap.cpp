// Overlapping copies with computation: while batch i is computed on one stream, batch i+1
// is copied from pinned host memory on another. The program times the copies alone, the
// computation alone, and both overlapped; with enough work per batch the overlapped loop
// takes about as long as the larger of the two (the target: at most 1.15x).
//
//   overlap                 8 batches of 16 Mi floats, 40 passes each, on a GPU;
//                           small sizes on the CPU (CI), where nothing overlaps
//   overlap B N K           B batches of N floats, K passes of work per batch
#include <et/et.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The work of one batch: K dependent elementwise passes and a sum.
template <et::Device D>
et::Tensor<float, 0, D> work(const et::Tensor<float, 1, D>& x, int passes) {
  et::Tensor<float, 1, D> y = et::sin(x) * 0.5f + x;
  for (int k = 1; k < passes; ++k) y = et::sin(y) * 0.5f + x;
  return et::sum(y);
}

template <et::Device D>
int run(D dev, int batches, std::int64_t n, int passes) {
  std::printf("overlap on %s: %d batches of %lld floats (%.0f MiB), %d passes each\n", et::device_name<D>.c_str(),
              batches, (long long)n, n * 4.0 / (1 << 20), passes);
  std::vector<et::Tensor<float, 1, et::Pinned>> host;
  for (int b = 0; b < batches; ++b) host.push_back(et::rand<float>(et::cpu, {n}, b).pin());
  std::vector<et::Tensor<float, 1, D>> resident;  // for the compute-only loop
  for (const auto& h : host) resident.push_back(h.to(dev));
  et::synchronize(dev);

  // Copies alone.
  double start = now_ms();
  et::Tensor<float, 1, D> scratch;
  for (const auto& h : host) scratch = h.to(dev, et::non_blocking);
  et::synchronize(dev);
  const double copy_ms = now_ms() - start;

  // Computation alone.
  std::vector<float> alone(batches);
  start = now_ms();
  std::vector<et::Tensor<float, 0, D>> sums;
  for (const auto& x : resident) sums.push_back(work(x, passes));
  et::synchronize(dev);
  const double compute_ms = now_ms() - start;
  for (int b = 0; b < batches; ++b) alone[b] = sums[b].item();

  // [guide:overlap]
  const auto copy_stream = et::Stream<D>::create(), compute_stream = et::Stream<D>::create();
  std::vector<et::Event<D>> copied(batches);
  std::vector<et::Tensor<float, 0, D>> results(batches);
  start = now_ms();
  et::Tensor<float, 1, D> next;
  {
    et::StreamGuard on(copy_stream);
    next = host[0].to(dev, et::non_blocking);
    copied[0].record();
  }
  for (int b = 0; b < batches; ++b) {
    const et::Tensor<float, 1, D> current = next;
    if (b + 1 < batches) {  // start the next copy before this batch's work
      et::StreamGuard on(copy_stream);
      next = host[b + 1].to(dev, et::non_blocking);
      copied[b + 1].record();
    }
    compute_stream.wait(copied[b]);  // this batch's work starts when its copy is done
    et::StreamGuard on(compute_stream);
    results[b] = work(current, passes);
  }
  compute_stream.synchronize();
  // [guide:end]
  const double overlapped_ms = now_ms() - start;

  bool same = true;
  for (int b = 0; b < batches; ++b) same = same && results[b].item() == alone[b];
  const double ratio = overlapped_ms / std::max(copy_ms, compute_ms);
  std::printf("  copies alone %.2f ms, computation alone %.2f ms, overlapped %.2f ms: %.2fx the larger%s\n", copy_ms,
              compute_ms, overlapped_ms, ratio, D::is_cuda ? (ratio <= 1.15 ? " (target <= 1.15: met)" : " (target <= 1.15: MISSED)") : "");
  std::printf("  results %s\n", same ? "identical to the computation alone: ok" : "DIFFER: FAILED");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool gpu = et::cuda_available();
  const int batches = argc > 1 ? std::atoi(argv[1]) : gpu ? 8 : 4;
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : gpu ? std::int64_t{16} << 20 : std::int64_t{1} << 16;
  const int passes = argc > 3 ? std::atoi(argv[3]) : gpu ? 40 : 2;
  if (batches < 1 || n < 1 || passes < 1) {
    std::fprintf(stderr, "usage: overlap [batches >= 1] [floats per batch >= 1] [passes >= 1]\n");
    return 2;
  }
  return et::try_gpu([&](auto dev) { return run(dev, batches, n, passes); });
}
