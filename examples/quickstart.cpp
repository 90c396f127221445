// etensor in one page: find the devices, pick one at run time, run a fused expression
// on it, and bring the result back to the host.
#include <et/et.hpp>

#include <cmath>
#include <cstdio>

int main() {
  const int gpus = et::device_count();
  std::printf("etensor quickstart: %d CUDA device(s)\n", gpus);
  for (int i = 0; i < gpus; ++i) {
    const et::DeviceProperties& p = et::device_properties(i);
    std::printf("  cuda:%d  %s, %.1f GiB, %d SMs, compute capability %d.%d\n", i, p.name.c_str(),
                static_cast<double>(p.total_memory) / (1 << 30), p.multiprocessors, p.compute_major, p.compute_minor);
  }
  if (gpus == 0) std::printf("  no GPU found: everything below runs on the CPU\n");

  // try_gpu hands cuda<0> to the lambda when a GPU exists, else cpu. Both paths are
  // compiled, so both are type-checked; `dev` is part of every tensor type below.
  return et::try_gpu([](auto dev) {
    using Dev = decltype(dev);
    std::printf("running on %s\n", et::device_name<Dev>.c_str());

    const auto x_host = et::randn<float>(et::cpu, {4, 3}, /*seed=*/42);
    const auto x = x_host.to(dev);                              // CPU -> device
    const auto b = et::linspace<float>(dev, -1.0, 1.0, 3);      // broadcasts over rows

    // One expression, one kernel: nothing runs until it is assigned.
    const et::Tensor<float, 2, Dev> y = et::tanh(x) * 0.5f + et::relu(b) - et::sigmoid(x * b);

    const auto y_host = y.to(et::cpu);                          // device -> CPU
    const auto values = y_host.to_vector();
    const auto xs = x_host.to_vector();
    const float bs[3] = {-1.0f, 0.0f, 1.0f};
    double worst = 0;
    for (int r = 0; r < 4; ++r) {
      std::printf("  y[%d] =", r);
      for (int c = 0; c < 3; ++c) {
        const double xv = xs[r * 3 + c], bv = bs[c];
        const double expected = std::tanh(xv) * 0.5 + std::max(bv, 0.0) - 1.0 / (1.0 + std::exp(-xv * bv));
        worst = std::max(worst, std::abs(values[r * 3 + c] - expected));
        std::printf(" %+.5f", values[r * 3 + c]);
      }
      std::printf("\n");
    }
    std::printf("round trip cpu -> %s -> cpu done; largest difference from a double-precision host check: %.2e\n",
                et::device_name<Dev>.c_str(), worst);
    return worst < 1e-5 ? 0 : 1;
  });
}
