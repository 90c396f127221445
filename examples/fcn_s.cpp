// Trains FCN-S (examples/fcn_s.hpp; Shi et al.'s fully connected benchmark network) on one
// synthetic mini-batch for a few steps, on the CPU and on the first GPU when there is one,
// printing the loss and the seconds per mini-batch; checks that the loss goes down and that
// the GPU's losses are the CPU's, and that with the SGD step in the backward (each weight
// updated by the GEMM that computes its gradient, each bias as soon as its gradient is
// complete) they stay the same. bench/fcn.cu times it in the benchmark table's format.
//
//   fcn_s [divisor] [steps]   layer widths divided by divisor (default 1: the real sizes)
#include "fcn_s.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

template <et::Device D>
std::vector<float> train(D dev, const fcn::Sizes& sizes, int steps, const char* where, bool in_backward = false) {
  auto model = fcn::make_model(dev, sizes);
  const auto batch = fcn::synthetic_batch(dev, sizes, 7);
  // [guide:fcn-overlap]
  et::optim::SGD opt(model.parameters(), {.lr = 0.01});
  if (in_backward) opt.overlap_with_backward();  // then train_step as before: step() waits for the updates
  // [guide:end]
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const float loss = fcn::train_step(model, opt, batch).item();  // item() waits for the step
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-4s step %d: loss %.5f, %.4f s per mini-batch\n", where, step, loss, seconds);
    losses.push_back(loss);
  }
  return losses;
}

int main(int argc, char** argv) {
  const std::int64_t divisor = argc > 1 ? std::atoll(argv[1]) : 1;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  if (divisor < 1 || divisor > 2048 || steps < 2) {
    std::fprintf(stderr, "usage: fcn_s [divisor in 1..2048] [steps >= 2]\n");
    return 2;
  }
  const fcn::Sizes sizes = fcn::scaled(divisor);
  std::printf("FCN-S %lld -> %lld -> %lld -> %lld -> %lld, batch %lld, SGD lr 0.01\n", (long long)sizes.input,
              (long long)sizes.hidden, (long long)sizes.hidden, (long long)sizes.hidden, (long long)sizes.output,
              (long long)sizes.batch);
  const auto cpu = train(et::cpu, sizes, steps, "cpu");
  bool ok = cpu.back() < cpu.front();
  if (!ok) std::printf("FAIL: the CPU's loss did not go down\n");
#if defined(__CUDACC__)
  if (et::device_count() > 0) {
    const auto gpu = train(et::cuda<0>, sizes, steps, "gpu");
    for (std::size_t k = 0; k < cpu.size(); ++k)
      if (!(std::abs(gpu[k] - cpu[k]) <= 1e-3f * std::abs(cpu[k]))) {
        std::printf("FAIL: step %zu: the GPU's loss %.6f is not the CPU's %.6f\n", k, gpu[k], cpu[k]);
        ok = false;
      }
    // In the backward, SGD's step is folded into the weight-gradient GEMMs: rounded once
    // less, so the losses agree to float's precision rather than bit for bit.
    const auto folded = train(et::cuda<0>, sizes, steps, "gpu, step in backward,", true);
    for (std::size_t k = 0; k < gpu.size(); ++k)
      if (!(std::abs(folded[k] - gpu[k]) <= 1e-5f * std::abs(gpu[k]))) {
        std::printf("FAIL: step %zu: with the step in the backward, the loss %.6f is not %.6f\n", k, folded[k], gpu[k]);
        ok = false;
      }
  }
#endif
  std::printf("%s\n", ok ? "fcn_s: OK" : "fcn_s: FAILED");
  return ok ? 0 : 1;
}
