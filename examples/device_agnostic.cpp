// One function template for every device. The device is a template parameter of the
// tensors, so the same source compiles for the CPU and for each GPU; which one runs is
// decided at run time. The results of all devices are compared with each other.
//
//   device_agnostic            the CPU, then every GPU this process sees (at most two)
//   device_agnostic cuda:0     one device: cpu, cuda (= cuda:0), cuda:0 or cuda:1
#include <et/et.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

// [guide:device-template]
// Standardizes each row of x to mean 0 and standard deviation 1 (layer normalization
// without its learned scale and shift). Written once; D is whatever device x is on.
template <et::Device D>
et::Tensor<float, 2, D> standardize_rows(const et::Tensor<float, 2, D>& x, float epsilon = 1e-5f) {
  const auto mean = et::mean(x, 1, true);                         // [rows, 1], on D
  const auto variance = et::mean(et::square(x - mean), 1, true);  // x - mean is never stored
  return (x - mean) / et::sqrt(variance + epsilon);               // one kernel into the result
}

// y <- a * x + y (BLAS's saxpy), in y's storage: one fused kernel on D.
template <et::Device D>
void saxpy(float a, const et::Tensor<float, 1, D>& x, et::Tensor<float, 1, D>& y) {
  y += a * x;
}
// [guide:end]

struct Result {
  std::string device;
  std::vector<float> rows;  // standardize_rows's output, row-major
  std::vector<float> y;     // saxpy's output
};

constexpr std::int64_t rows = 256, cols = 512;

// The whole computation on one device: inputs made there, results copied to the host.
template <et::Device D>
Result compute(D dev) {
  // randn is counter-based: every device draws the same numbers for the same seed.
  const et::Tensor<float, 2, D> x = et::randn<float>(dev, {rows, cols}, /*seed=*/7) * 3.0f + 1.0f;
  const auto z = standardize_rows(x);
  auto y = et::linspace<float>(dev, 0.0, 1.0, cols);
  saxpy(0.5f, z.select(0, 0), y);  // row 0 of z, a view: nothing is copied
  return {et::device_name<D>.c_str(), z.to_vector(), y.to_vector()};
}

// Checks one device's answer on the host, in double: every row has mean 0 and standard
// deviation 1, and y = 0.5 * row 0 + linspace(0, 1).
bool check(const Result& r) {
  double worst_mean = 0, worst_deviation = 0, worst_y = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    double sum = 0, squares = 0;
    for (std::int64_t j = 0; j < cols; ++j) sum += r.rows[i * cols + j];
    for (std::int64_t j = 0; j < cols; ++j) squares += std::pow(r.rows[i * cols + j] - sum / cols, 2);
    worst_mean = std::max(worst_mean, std::abs(sum / cols));
    worst_deviation = std::max(worst_deviation, std::abs(std::sqrt(squares / cols) - 1.0));
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    const double expected = 0.5 * r.rows[j] + static_cast<double>(j) / (cols - 1);
    worst_y = std::max(worst_y, std::abs(r.y[j] - expected));
  }
  std::printf("  %-7s rows of %lld: means within %.1e of 0, standard deviations within %.1e of 1; saxpy within %.1e\n",
              r.device.c_str(), static_cast<long long>(cols), worst_mean, worst_deviation, worst_y);
  return worst_mean < 1e-5 && worst_deviation < 1e-4 && worst_y < 1e-5;
}

int main(int argc, char** argv) {
  // Every device index compiles to its own instantiation of compute<D>, so the number of
  // GPUs this program can use is fixed here, at compile time.
  constexpr int max_gpus = 2;
  const auto run = [](auto dev) { return compute(dev); };
  std::vector<Result> results;
  try {
    // [guide:run-time-choice]
    if (argc > 1) {  // a device by name: "cpu", "cuda", "cuda:1"
      results.push_back(et::with_device<max_gpus>(std::string_view(argv[1]), run));
    } else {         // the CPU (index -1), then each GPU there is
      const int gpus = std::min(et::device_count(), max_gpus);
      for (int index = -1; index < gpus; ++index) results.push_back(et::with_device<max_gpus>(index, run));
    }
    // [guide:end]
  } catch (const et::Error& e) {  // an unknown name, or a GPU this process does not have
    std::fprintf(stderr, "device_agnostic: %s\n", e.what());
    return 2;
  }

  std::printf("device_agnostic: %lld x %lld standardized on %zu device(s)\n", static_cast<long long>(rows),
              static_cast<long long>(cols), results.size());
  bool ok = true;
  for (const Result& r : results) ok = check(r) && ok;
  for (std::size_t k = 1; k < results.size(); ++k) {
    double worst = 0;
    for (std::size_t i = 0; i < results[0].rows.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(results[k].rows[i] - results[0].rows[i])));
    for (std::size_t i = 0; i < results[0].y.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(results[k].y[i] - results[0].y[i])));
    std::printf("  %s against %s: largest difference %.1e\n", results[k].device.c_str(), results[0].device.c_str(),
                worst);
    ok = ok && worst < 1e-5;
  }
  if (results.size() == 1 && argc == 1) std::printf("  no GPU found: nothing to compare the CPU with\n");
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
