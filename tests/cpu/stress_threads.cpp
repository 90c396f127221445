// Several threads using etensor on the CPU at once (issue 47), built with ThreadSanitizer
// (tests/CMakeLists.txt: et_stress_threads, test cpu.threads). It tests what the library
// promises about threads, no more:
//
//  - tensors, fused expressions, reductions and matrix products on tensors of each thread's
//    own, and reads of tensors that all threads share;
//  - views of a shared tensor made in grad mode by several threads, once the handle has
//    autograd state (docs/design.md: a handle without state must be given one first, or be
//    viewed under NoGradGuard; both ways are used here);
//  - graphs recorded by several threads that share leaves: their gradients all arrive in
//    the leaves' grad() (autograd/graph.hpp locks the accumulators, leaf_mutex);
//  - each thread's own leaves, graphs and backward passes, concurrently;
//  - NoGradGuard, MathModeGuard and et::testing::FailAllocation, which are per thread;
//  - the allocator's counters (memory_stats), updated by every thread;
//  - a DataLoader per thread over one shared dataset (a loader itself is one thread's:
//    it has no worker threads and runs one epoch at a time).
//
// Every result is checked against a value computed here, so a race that gives a wrong
// answer fails the test, not only TSan's report. The shared leaves' values and inputs are
// small integers in double: their gradients are sums of integers, exact in any order, so a
// lost update is an inequality and not a rounding question.
//
// OpenMP: the CPU backend's loops are OpenMP (backend/cpu/*.hpp) and libgomp is not built
// with TSan, whose reports about the handoffs inside libgomp's thread team would be false.
// So every thread here runs its OpenMP regions with a team of one (omp_set_num_threads(1)
// in each thread; the test also sets OMP_NUM_THREADS=1): the library's loops run on the
// calling thread, with the same code paths. What this leaves out is a race inside one
// OpenMP team (between the partial results of one reduction, say), which TSan could not
// judge here anyway; the CPU unit tests check those results against references.
//
// Several threads' backward() through graphs that share a leaf run at the same time: the
// exact gradients check the accumulators' lock (AccumulateGrad::apply), and TSan the
// engine's bookkeeping (Node::graph_consumers, a plain int written by every backward until
// this test found the race, issue 47).
#include <et/data/loader.hpp>
#include <et/et.hpp>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <latch>
#include <mutex>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using et::Cpu;

constexpr int thread_count = 6;
constexpr int rounds = 40;

std::atomic<std::int64_t> checks{0}, failures{0};
std::mutex report_mutex;

void check(bool ok, int thread, int round, const std::string& what) {
  checks.fetch_add(1, std::memory_order_relaxed);
  if (ok) return;
  failures.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(report_mutex);
  std::fprintf(stderr, "FAILED: thread %d, round %d: %s\n", thread, round, what.c_str());
}

template <class... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

bool close(double got, double want, double tolerance) {
  return std::fabs(got - want) <= tolerance * (1 + std::fabs(want));
}

/// Deterministic values from (seed, i): integers in [-3, 3], or reals in [-2, 2].
double small_integer(std::uint64_t seed, std::uint64_t i) {
  return double(et::detail::splitmix64(seed * 0x9e3779b97f4a7c15ull + i) % 7) - 3.0;
}
double real(std::uint64_t seed, std::uint64_t i) {
  return double(et::detail::splitmix64(seed * 0xbf58476d1ce4e5b9ull + i) >> 11) * 0x1.0p-53 * 4.0 - 2.0;
}
template <class T>
std::vector<T> values(std::size_t n, std::uint64_t seed, bool integers) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = T(integers ? small_integer(seed, i) : real(seed, i));
  return out;
}

// The shapes of the shared-leaf graph: out = matmul(A, W) + b, loss = sum(out * G).
constexpr std::int64_t rows = 5, inner = 8, cols = 4;

struct Shared {
  et::Tensor<double, 2, Cpu> W;  // leaf [inner, cols], requires grad, read by every thread
  et::Tensor<double, 1, Cpu> b;  // leaf [cols], requires grad
  et::Tensor<float, 2, Cpu> table;  // [64, 16], no gradient; given autograd state before the threads
  et::Tensor<float, 2, Cpu> plain;  // [64, 16], no autograd state: viewed under NoGradGuard only
  std::vector<float> table_values, plain_values;
};

/// What a thread adds to the shared leaves' gradients, computed on the host.
struct Expected {
  std::vector<double> dW = std::vector<double>(inner * cols, 0.0), db = std::vector<double>(cols, 0.0);
  std::int64_t explicit_allocations = 0;
};

using Dataset = et::data::TensorDataset<et::Tensor<float, 2, Cpu>, et::Tensor<std::int64_t, 1, Cpu>>;
constexpr std::int64_t samples = 45;

Dataset numbered_dataset() {
  std::vector<float> x(static_cast<std::size_t>(samples * 3));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(10 * (i / 3) + i % 3);
  std::vector<std::int64_t> y(static_cast<std::size_t>(samples));
  std::iota(y.begin(), y.end(), 0);
  return Dataset(et::from_vector(et::cpu, x, {samples, 3}), et::from_vector(et::cpu, y, {samples}));
}

// --- the work of one round ---------------------------------------------------------------

void fused_expressions(int t, int r) {
  const std::uint64_t seed = 1000u * std::uint64_t(t) + std::uint64_t(r);
  const std::int64_t n = 3000;
  const auto host = values<float>(std::size_t(n), seed, false);
  const auto x = et::from_vector(et::cpu, host, {n});
  const et::Tensor<float, 1, Cpu> y = et::exp(x * 0.5f) * 2.0f - et::tanh(x) + x * x;
  const auto got = y.to_vector();
  std::size_t wrong = 0;
  double total = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const double v = host[i], want = std::exp(v * 0.5) * 2.0 - std::tanh(v) + v * v;
    wrong += !close(got[i], want, 1e-5);
    total += want;
  }
  check(wrong == 0, t, r, describe("exp(x/2)*2 - tanh(x) + x*x: ", wrong, " wrong elements"));
  const float sum = et::sum(et::exp(x * 0.5f) * 2.0f - et::tanh(x) + x * x).item();
  check(close(sum, total, 1e-4), t, r, describe("the fused sum ", sum, ", expected ", total));

  // Row maxima of a [30, 100] view of the same data, through a transposed view.
  const auto m = x.view({30, 100});
  const auto row_max = et::max(m.transpose(0, 1), 0).to_vector();
  std::size_t max_wrong = 0;
  for (std::size_t i = 0; i < 30; ++i)
    max_wrong += row_max[i] != *std::max_element(host.begin() + std::ptrdiff_t(i * 100),
                                                 host.begin() + std::ptrdiff_t(i * 100 + 100));
  check(max_wrong == 0, t, r, describe("max over a transposed view: ", max_wrong, " wrong rows"));
}

void shared_reads_and_views(Shared& s, int t, int r) {
  // Views of the shared table in grad mode (it has autograd state); of `plain` under NoGradGuard.
  const std::int64_t first = (t * 7 + r) % 60;
  double want = 0, want_plain = 0;
  for (std::int64_t i = first; i < first + 4; ++i)
    for (std::int64_t j = 0; j < 16; j += 2) {
      want += 3.0 * s.table_values[std::size_t(i * 16 + j)];
      want_plain += s.plain_values[std::size_t(i * 16 + j)];
    }
  const auto rows_of_table = s.table.slice(0, first, first + 4).transpose(0, 1).slice(0, 0, 16, 2);
  const float got = et::sum(rows_of_table * 3.0f).item();
  check(close(got, want, 1e-5), t, r, describe("a view of the shared table: ", got, ", expected ", want));
  float got_plain = 0;
  {
    et::NoGradGuard no_grad;
    got_plain = et::sum(s.plain.slice(0, first, first + 4).slice(1, 0, 16, 2)).item();
  }
  check(close(got_plain, want_plain, 1e-5), t, r,
        describe("a view of the stateless shared tensor: ", got_plain, ", expected ", want_plain));
}

void shared_leaf_graph(Shared& s, Expected& e, int t, int r) {
  const std::uint64_t seed = 5000u + 1000u * std::uint64_t(t) + std::uint64_t(r);
  const auto a = values<double>(rows * inner, seed, true), g = values<double>(rows * cols, seed + 7, true);
  const auto A = et::from_vector(et::cpu, a, {rows, inner});
  const auto G = et::from_vector(et::cpu, g, {rows, cols});
  const et::Tensor<double, 2, Cpu> out = et::matmul(A, s.W) + s.b;
  const auto loss = et::sum(out * G);
  check(loss.requires_grad(), t, r, "the loss over shared leaves requires grad");

  // The forward value, exact: W holds i % 5 - 2 (row-major), b holds j - 1.
  double want = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      double out = double(j) - 1.0;
      for (std::int64_t k = 0; k < inner; ++k) out += a[std::size_t(i * inner + k)] * double((k * cols + j) % 5 - 2);
      want += out * g[std::size_t(i * cols + j)];
    }
  const double got = loss.item();
  check(got == want, t, r, describe("the shared-leaf loss ", got, ", expected ", want));
  loss.backward();
  // dW = A^T G, db = the column sums of G.
  for (std::int64_t k = 0; k < inner; ++k)
    for (std::int64_t j = 0; j < cols; ++j)
      for (std::int64_t i = 0; i < rows; ++i)
        e.dW[std::size_t(k * cols + j)] += a[std::size_t(i * inner + k)] * g[std::size_t(i * cols + j)];
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) e.db[std::size_t(j)] += g[std::size_t(i * cols + j)];
}

void own_graph(int t, int r) {
  // A leaf of this thread's own, through a view, a fused expression and a matrix product.
  const std::uint64_t seed = 9000u + 1000u * std::uint64_t(t) + std::uint64_t(r);
  const auto u_values = values<double>(16, seed, false), m_values = values<double>(16, seed + 1, false);
  auto u = et::from_vector(et::cpu, u_values, {16});
  u.requires_grad_(true);
  const auto M = et::from_vector(et::cpu, m_values, {4, 4});
  const auto middle = u.slice(0, 4, 12);  // u[4:12]
  const et::Tensor<double, 2, Cpu> mixed = et::matmul(M, u.view({4, 4}));  // M (u as 4x4)
  const et::Tensor<double, 0, Cpu> loss =
      et::sum(et::exp(u) * et::sin(u)) + et::sum(et::square(middle)) * 0.5 + et::sum(et::tanh(mixed));
  loss.backward();
  const auto grad = u.grad().to_vector();
  // d/du: exp(u)(sin u + cos u), + u on [4, 12), + M^T (1 - tanh(M U)^2) laid out as u.
  std::vector<double> want(16);
  for (std::size_t i = 0; i < 16; ++i) {
    const double v = u_values[i];
    want[i] = std::exp(v) * (std::sin(v) + std::cos(v)) + (i >= 4 && i < 12 ? v : 0.0);
  }
  for (std::size_t k = 0; k < 4; ++k)
    for (std::size_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (std::size_t i = 0; i < 4; ++i) {
        double mu = 0;
        for (std::size_t q = 0; q < 4; ++q) mu += m_values[i * 4 + q] * u_values[q * 4 + j];
        sum += m_values[i * 4 + k] * (1 - std::tanh(mu) * std::tanh(mu));
      }
      want[k * 4 + j] += sum;
    }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < 16; ++i) wrong += !close(grad[i], want[i], 1e-12);
  check(wrong == 0, t, r, describe("an own leaf's gradient: ", wrong, " of 16 wrong"));
}

void per_thread_modes(Shared& s, int t, int r) {
  // NoGradGuard and MathModeGuard on this thread only, while the others record.
  const auto mode = static_cast<et::MathMode>((t + r) % 4);
  et::MathModeGuard math(mode);
  if ((t + r) % 2 == 0) {
    et::NoGradGuard no_grad;
    const et::Tensor<double, 2, Cpu> z = s.W * 2.0;
    check(!et::grad_enabled() && !z.requires_grad(), t, r, "under NoGradGuard a result of a leaf is not recorded");
  } else {
    const et::Tensor<double, 2, Cpu> z = s.W * 2.0;
    check(et::grad_enabled() && z.requires_grad(), t, r, "in grad mode a result of a leaf is recorded");
  }
  check(et::grad_enabled(), t, r, "grad mode is back on after the guard");
  check(et::math_mode() == mode, t, r, "this thread's math mode");
}

void allocations(Expected& e, int t, int r) {
  // Explicit allocations (counted), one held big block, and an injected failure on this
  // thread only: the other threads' allocations meanwhile must all succeed.
  std::vector<et::Tensor<float, 1, Cpu>> held;
  for (int i = 0; i < 8; ++i) held.push_back(et::empty<float>(et::cpu, {64 + 16 * i + t}));
  const auto big = et::zeros<float>(et::cpu, {1 << 18});  // 1 MiB
  e.explicit_allocations += 9;
  check(big.to_vector()[std::size_t(r)] == 0.0f, t, r, "zeros");
  for (int i = 0; i < 256; ++i) {  // a burst, which the other threads' bursts meet in the counters
    const auto block = et::empty<float>(et::cpu, {16 + i % 8});
    check(block.numel() == 16 + i % 8, t, r, "an empty tensor's size");
  }
  e.explicit_allocations += 256;
  bool threw = false;
  {
    et::testing::FailAllocation fail(2);
    try {
      const auto first = et::empty<float>(et::cpu, {32});
      const auto second = et::empty<float>(et::cpu, {32});  // fails
    } catch (const et::OutOfMemory&) {
      threw = true;
    }
    check(threw && fail.failed() && fail.allocations() == 2, t, r,
          "FailAllocation(2) fails this thread's second allocation");
  }
  e.explicit_allocations += 1;  // the first of the two
}

void data_loader(const Dataset& dataset, int t, int r) {
  et::data::DataLoader loader(dataset, et::cpu,
                              {.batch_size = 4 + t, .shuffle = true, .seed = std::uint64_t(100 * t + r)});
  std::vector<std::int64_t> seen;
  std::size_t wrong_rows = 0;
  for (const auto& [x, y] : loader) {
    const auto xs = x.to_vector();
    const auto ys = y.to_vector();
    for (std::size_t i = 0; i < ys.size(); ++i)
      for (std::size_t j = 0; j < 3; ++j) wrong_rows += xs[i * 3 + j] != float(10 * ys[i] + std::int64_t(j));
    seen.insert(seen.end(), ys.begin(), ys.end());
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::int64_t> all(static_cast<std::size_t>(samples));
  std::iota(all.begin(), all.end(), 0);
  check(wrong_rows == 0 && seen == all, t, r, "a loader's epoch: every sample once, each row its own");
}

}  // namespace

int main() {
  omp_set_num_threads(1);  // see the file's comment (OpenMP)
  const auto started = std::chrono::steady_clock::now();

  Shared s;
  {
    std::vector<double> w(inner * cols), b(cols);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = double(int(i % 5) - 2);
    for (std::size_t j = 0; j < b.size(); ++j) b[j] = double(j) - 1.0;
    s.W = et::from_vector(et::cpu, w, {inner, cols});
    s.b = et::from_vector(et::cpu, b, {cols});
    s.W.requires_grad_(true);
    s.b.requires_grad_(true);
  }
  s.table_values = values<float>(64 * 16, 77, false);
  s.plain_values = values<float>(64 * 16, 78, false);
  s.table = et::from_vector(et::cpu, s.table_values, {64, 16});
  s.table.requires_grad_(false);  // gives the handle its autograd state before the threads view it
  s.plain = et::from_vector(et::cpu, s.plain_values, {64, 16});
  const Dataset dataset = numbered_dataset();

  const et::MemoryStats before = et::memory_stats(et::cpu);
  std::vector<Expected> expected(thread_count);
  std::latch start(thread_count);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      omp_set_num_threads(1);
      check(omp_get_max_threads() == 1, t, -1, "OpenMP teams of one on this thread");
      start.arrive_and_wait();
      for (int r = 0; r < rounds; ++r) {
        try {
          fused_expressions(t, r);
          shared_reads_and_views(s, t, r);
          shared_leaf_graph(s, expected[std::size_t(t)], t, r);
          own_graph(t, r);
          per_thread_modes(s, t, r);
          allocations(expected[std::size_t(t)], t, r);
          data_loader(dataset, t, r);
        } catch (const std::exception& e) {
          check(false, t, r, describe("threw: ", e.what()));
        }
      }
    });
  for (auto& thread : threads) thread.join();

  // Every thread's contributions arrived in the shared leaves' gradients, exactly.
  Expected total;
  for (const Expected& e : expected) {
    for (std::size_t i = 0; i < total.dW.size(); ++i) total.dW[i] += e.dW[i];
    for (std::size_t j = 0; j < total.db.size(); ++j) total.db[j] += e.db[j];
    total.explicit_allocations += e.explicit_allocations;
  }
  check(s.W.grad().to_vector() == total.dW, -1, rounds, "the shared leaf W's gradient: every thread's, summed");
  check(s.b.grad().to_vector() == total.db, -1, rounds, "the shared leaf b's gradient: every thread's, summed");

  // The counters: what the threads allocated is freed but the two gradients they left in
  // the shared leaves, and each allocation was counted.
  const et::MemoryStats after = et::memory_stats(et::cpu);
  const std::size_t gradient_bytes = (inner * cols + cols) * sizeof(double);
  check(after.allocated == before.allocated + gradient_bytes, -1, rounds,
        describe("bytes allocated: ", after.allocated, ", expected ", before.allocated, " + ", gradient_bytes,
                 " (the shared leaves' gradients)"));
  check(after.allocations == before.allocations + 2, -1, rounds,
        describe("live blocks: ", after.allocations, ", expected ", before.allocations, " + 2"));
  check(after.total_allocations >= before.total_allocations + std::size_t(total.explicit_allocations), -1, rounds,
        describe("allocations counted: ", after.total_allocations - before.total_allocations, ", at least ",
                 total.explicit_allocations, " made explicitly"));
  check(after.peak_allocated >= before.allocated + (std::size_t{1} << 20), -1, rounds, "the peak saw a 1 MiB block");

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("stress_threads: %d threads x %d rounds, %lld checks, %lld failed, %.1f s\n", thread_count, rounds,
              static_cast<long long>(checks.load()), static_cast<long long>(failures.load()), seconds);
  return failures.load() == 0 ? 0 : 1;
}
