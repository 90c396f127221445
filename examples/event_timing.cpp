// Timing GPU work with events, as PyTorch's tutorial times it with torch.cuda.Event:
//
//   start = torch.cuda.Event(enable_timing=True); end = torch.cuda.Event(enable_timing=True)
//   start.record(); c = a @ b; end.record(); torch.cuda.synchronize()
//   print(start.elapsed_time(end))
//
// Events mark points in a stream; the time between two is measured on the device, so the
// host need not wait for the work in between. The same code times the CPU (Event<Cpu> keeps
// host time), which is how CI runs it. It also shows why the first product is slower
// (library set-up) and what one product costs in TFLOP/s.
//
//   event_timing          N = 512 (quick enough for CI)
//   event_timing 8192     the size the GPU benchmarks use
#include <et/et.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>

template <et::Device D>
int run(D dev, std::int64_t n) {
  std::printf("event timing on %s, %lld x %lld float matmul\n", et::device_name<D>.c_str(), (long long)n, (long long)n);
  const auto a = et::randn<float>(dev, {n, n}, 1), b = et::randn<float>(dev, {n, n}, 2);
  et::Tensor<float, 2, D> c = et::zeros<float>(dev, {n, n});
  const auto stream = et::current_stream(dev);

  // [guide:events]
  et::Event<D> start, end;
  start.record();
  c = et::matmul(a, b);  // the first call also sets the library up
  end.record();
  end.synchronize();
  const float first_ms = elapsed_ms(start, end);

  constexpr int repeats = 5;
  start.record(stream);
  for (int i = 0; i < repeats; ++i) c = et::matmul(a, b);
  end.record(stream);
  const float ms = elapsed_ms(start, end) / repeats;  // waits for `end` by itself
  // [guide:end]

  const double tflops = 2.0 * double(n) * double(n) * double(n) / (ms * 1e-3) / 1e12;
  std::printf("  first product %.3f ms, then %.3f ms each (%.2f TFLOP/s)\n", first_ms, ms, tflops);
  // c[0, 0] against a double-precision dot product
  const auto ha = a.to_vector(), hb = b.to_vector();
  double exact = 0, scale = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    exact += double(ha[k]) * hb[k * n];
    scale += std::abs(double(ha[k]) * hb[k * n]);
  }
  const double error = std::abs(c.to_vector()[0] - exact) / scale;
  const bool ok = ms > 0 && first_ms > 0 && error < 1e-3;
  std::printf("  c[0,0] relative error %.2e: %s\n", error, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 512;
  if (n <= 0) {
    std::fprintf(stderr, "usage: event_timing [N > 0]\n");
    return 2;
  }
  return et::try_gpu([&](auto dev) { return run(dev, n); });
}
