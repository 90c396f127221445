// What every benchmark times on the host, the plain-C++ CPU ones (cpu_chain, cpu_gemm,
// table7_cpu) and, through common.cuh, the CUDA ones: the median of a set of times, the wall
// clock around a function, and the thread counts of a --threads list. No CUDA here.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

/// The median of `times` (not empty).
inline double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const std::size_t k = times.size();
  return k % 2 ? times[k / 2] : 0.5 * (times[k / 2 - 1] + times[k / 2]);
}

/// Median wall-clock microseconds of run() over `reps` calls, after `warmup` untimed ones.
template <class Run>
double wall_median_us(Run&& run, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

/// The numbers of a comma-separated list ("1,2,4"), as atoi reads each.
inline std::vector<int> thread_counts(const std::string& list) {
  std::vector<int> counts;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) counts.push_back(std::atoi(item.c_str()));
  return counts;
}

}  // namespace bench
