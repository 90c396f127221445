// The seeds' exercise "two GPUs at once vs one": the same batches of work (a matrix product
// and a reduction each) on one GPU, then split over two, from one host thread. Each GPU
// queues its half on its own stream, so both run at once; the split should take about half
// the time. The per-batch results must agree between the two runs.
//
//   two_gpus            8 batches of 4096 x 4096 float products
//   two_gpus B N        B batches of N x N
// With fewer than two GPUs it says so and exits with 77 (CTest: skipped).
#include <et/et.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <et::Device D>
et::Tensor<float, 0, D> batch(const et::Tensor<float, 2, D>& a, const et::Tensor<float, 2, D>& b) {
  const et::Tensor<float, 2, D> c = et::relu(et::matmul(a, b));  // the product, then ReLU in its epilogue
  return et::mean(c);
}

}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  if (batches < 2 || n < 1) {
    std::fprintf(stderr, "usage: two_gpus [batches >= 2] [N >= 1]\n");
    return 2;
  }
  if (et::device_count() < 2) {
    std::printf("SKIPPED: two_gpus needs two GPUs; this process sees %d\n", et::device_count());
    return 77;
  }
#if defined(__CUDACC__)
  std::printf("two GPUs: %d batches of %lld x %lld float products\n", batches, (long long)n, (long long)n);
  const auto a0 = et::randn<float>(et::cuda<0>, {n, n}, 1), b0 = et::randn<float>(et::cuda<0>, {n, n}, 2);
  const auto a1 = a0.to(et::cuda<1>), b1 = b0.to(et::cuda<1>);
  std::vector<et::Tensor<float, 2, et::Cuda<0>>> on0;  // batch i: a * (1 + i/100), on each GPU
  std::vector<et::Tensor<float, 2, et::Cuda<1>>> on1;
  for (int i = 0; i < batches; ++i) {
    const float scale = 1.0f + 0.01f * float(i);
    on0.emplace_back(a0 * scale);
    on1.emplace_back(a1 * scale);
  }
  (void)batch(on0[0], b0).item();  // warm-up: library set-up on both devices
  (void)batch(on1[0], b1).item();

  // [guide:two-gpus-at-once]
  double start = now_ms();
  std::vector<et::Tensor<float, 0, et::Cuda<0>>> one;
  for (int i = 0; i < batches; ++i) one.push_back(batch(on0[i], b0));
  et::synchronize(et::cuda<0>);
  const double one_ms = now_ms() - start;

  start = now_ms();
  std::vector<et::Tensor<float, 0, et::Cuda<0>>> first;
  std::vector<et::Tensor<float, 0, et::Cuda<1>>> second;
  for (int i = 0; i < batches; ++i) {  // queued alternately: both GPUs busy from the start
    if (i % 2 == 0) first.push_back(batch(on0[i], b0));
    else second.push_back(batch(on1[i], b1));
  }
  et::synchronize(et::cuda<0>);
  et::synchronize(et::cuda<1>);
  const double two_ms = now_ms() - start;
  // [guide:end]

  bool agree = true;
  for (int i = 0; i < batches; ++i) {
    const float split = i % 2 == 0 ? first[i / 2].item() : second[i / 2].item();
    const float single = one[i].item();
    agree = agree && std::fabs(split - single) <= 1e-4f * std::fabs(single);
  }
  std::printf("  one GPU %.2f ms, two GPUs %.2f ms: %.2fx faster\n", one_ms, two_ms, one_ms / two_ms);
  std::printf("  per-batch results %s\n", agree ? "agree: ok" : "DIFFER: FAILED");
  return agree ? 0 : 1;
#else
  std::printf("SKIPPED: two_gpus runs kernels, so it needs nvcc\n");
  return 77;
#endif
}
