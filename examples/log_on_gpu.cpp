// Logging a value every iteration without stalling the GPU.
//
// Power iteration on a 100 x 100 symmetric matrix a: `steps` times y = a @ x, log the
// Frobenius norm of y, x = y / norm (x is 100 x 100 too, so each step is one product of
// two 100 x 100 matrices). The logged norms converge to the largest |eigenvalue| of a.
//
//   variant 1 copies each step's norm to the host (norm.item()): every step the CPU waits
//             for the GPU to finish, and the GPU then idles while the CPU queues the next.
//   variant 2 writes each norm into its element of a device tensor and copies the whole
//             log once at the end: the CPU queues all the steps without waiting.
//
// Both give the same log; the first steps are also checked against a double-precision
// loop on the host. On the CPU both variants cost the same (item() is a plain read).
//
//   log_on_gpu          1000 steps
//   log_on_gpu 50       fewer steps (CI)
#include <et/et.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr std::int64_t size = 100;

// [guide:log-host]
// Variant 1: each step's norm goes to the host as it is computed.
template <et::Device D>
std::vector<float> power_iteration_host_log(const et::Tensor<float, 2, D>& a, const et::Tensor<float, 2, D>& x0,
                                            int steps) {
  auto x = x0.clone();  // a copy: `auto x = x0;` would share x0's storage and overwrite it
  auto y = et::empty<float>(D{}, {size, size});
  std::vector<float> log(static_cast<std::size_t>(steps));
  for (int step = 0; step < steps; ++step) {
    y = et::matmul(a, x);             // one GEMM into y
    const auto norm = et::norm(y);    // a 0-d tensor on D: no copy yet
    x = y / norm;                     // one kernel; reads the norm where it is
    log[step] = norm.item();          // a copy to the host: waits for the GPU
  }
  return log;
}
// [guide:end]

// [guide:log-device]
// Variant 2: the log stays on the device until the end.
template <et::Device D>
std::vector<float> power_iteration_device_log(const et::Tensor<float, 2, D>& a, const et::Tensor<float, 2, D>& x0,
                                              int steps) {
  auto x = x0.clone();
  auto y = et::empty<float>(D{}, {size, size});
  auto log = et::empty<float>(D{}, {steps});
  for (int step = 0; step < steps; ++step) {
    y = et::matmul(a, x);
    const auto norm = et::norm(y);
    x = y / norm;
    log.slice(0, step, step + 1) = norm;  // into a one-element view of the log: no waiting
  }
  return log.to_vector();  // the only copy to the host
}
// [guide:end]

// The first `steps` norms of the same iteration, in double precision with plain loops.
std::vector<double> reference_log(const std::vector<float>& a_values, const std::vector<float>& x0_values, int steps) {
  std::vector<double> a(a_values.begin(), a_values.end()), x(x0_values.begin(), x0_values.end()), y(x.size());
  std::vector<double> log;
  for (int step = 0; step < steps; ++step) {
    double squares = 0;
    for (std::int64_t i = 0; i < size; ++i) {
      for (std::int64_t j = 0; j < size; ++j) {
        double dot = 0;
        for (std::int64_t k = 0; k < size; ++k) dot += a[i * size + k] * x[k * size + j];
        y[i * size + j] = dot;
        squares += dot * dot;
      }
    }
    const double norm = std::sqrt(squares);
    for (std::size_t e = 0; e < x.size(); ++e) x[e] = y[e] / norm;
    log.push_back(norm);
  }
  return log;
}

template <class F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (steps <= 0) {
    std::fprintf(stderr, "usage: log_on_gpu [steps > 0]\n");
    return 2;
  }
  return et::try_gpu([&](auto dev) {
    using D = decltype(dev);
    // a = (m + m^T) / (2 sqrt(size)): symmetric, so its largest |eigenvalue| is real
    // (about sqrt(2) for this size) and the norms converge to it.
    const auto m = et::randn<float>(dev, {size, size}, /*seed=*/3);
    const et::Tensor<float, 2, D> a = (m + m.transpose(0, 1)) * (0.5f / std::sqrt(float(size)));
    const auto x0 = et::rand<float>(dev, {size, size}, /*seed=*/4);

    power_iteration_device_log(a, x0, 2);  // warm-up: library handles, first allocations
    std::vector<float> host_log, device_log;
    const double host_seconds = seconds([&] { host_log = power_iteration_host_log(a, x0, steps); });
    const double device_seconds = seconds([&] { device_log = power_iteration_device_log(a, x0, steps); });

    double variants = 0;  // largest relative difference between the two logs
    for (int s = 0; s < steps; ++s)
      variants = std::max(variants, static_cast<double>(std::abs(host_log[s] - device_log[s]) / host_log[s]));
    const int checked = std::min(steps, 50);
    const auto reference = reference_log(a.to_vector(), x0.to_vector(), checked);
    double drift = 0;  // largest relative difference from the double-precision loop
    for (int s = 0; s < checked; ++s) drift = std::max(drift, std::abs(device_log[s] - reference[s]) / reference[s]);

    std::printf("log_on_gpu on %s: %d steps of %lld x %lld products\n", et::device_name<D>.c_str(), steps,
                static_cast<long long>(size), static_cast<long long>(size));
    std::printf("  norms: %.6f %.6f %.6f ... %.6f\n", device_log[0], device_log[std::min(1, steps - 1)],
                device_log[std::min(2, steps - 1)], device_log[steps - 1]);
    std::printf("  variant 1, norm.item() every step:      %8.1f us per step\n", host_seconds / steps * 1e6);
    std::printf("  variant 2, log in a device tensor:      %8.1f us per step  (%.2fx)\n", device_seconds / steps * 1e6,
                host_seconds / device_seconds);
    std::printf("  the two logs differ by at most %.1e (relative); the first %d steps differ from a\n"
                "  double-precision loop by at most %.1e\n",
                variants, checked, drift);
    const bool ok = variants < 1e-5 && drift < 1e-4;
    std::printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  });
}
