// Fault injection on the GPU: every allocation of a step made to fail in turn
// (et::testing::FailAllocation, tests/common/faults.hpp): each failure is an et::OutOfMemory,
// leaks nothing from etensor's pool, and the step right after it gives the right answer.
// Each step runs once before its sweep, so that the caches it fills on first use (the
// cuBLASLt workspace of the stream, cuDNN's plans) are in place: the sweep covers the
// allocations of every later call.
//
// And a kernel that traps (issue 47): in a child process, which the test starts from this
// same executable, so that the trap poisons the child's CUDA context and not this one.
#include "../common/faults.hpp"
#include "../common/reference.hpp"
#include "trap_child.hpp"

#include <et/et.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

using Gpu = et::Cuda<0>;

template <std::size_t R>
et::Tensor<float, int(R), Gpu> random_gpu(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  std::size_t n = 1;
  for (const std::int64_t extent : shape) n *= static_cast<std::size_t>(extent);
  return et::from_vector(et::cpu, test::random_values<float>(n, seed), shape).to(et::cuda<0>);
}

}  // namespace

TEST_CASE("every allocation of a GPU step can fail: et::OutOfMemory, nothing leaked, the retry works",
          "[faults]") {
  const auto x = random_gpu(std::array<std::int64_t, 2>{64, 48}, 1);
  const auto y = random_gpu(std::array<std::int64_t, 2>{64, 48}, 2);
  const auto w = random_gpu(std::array<std::int64_t, 2>{48, 32}, 3);

  SECTION("a fused assignment with a shared subexpression and a reduction inside") {
    auto step = [&] {
      const auto e = et::exp(x) * y + 1.0f;
      return et::eval(e * e - et::sum(x) + e);
    };
    CHECK(test::sweep_allocation_failures("gpu fused assignment", et::cuda<0>, step, test::equals(step())) >= 2);
  }
  SECTION("axis reductions, softmax and logsumexp") {
    auto step = [&] { return et::eval(et::softmax(x, 1) + et::max(x, 0, true) + et::sum(et::logsumexp(y, 1))); };
    CHECK(test::sweep_allocation_failures("gpu reductions", et::cuda<0>, step, test::equals(step())) >= 3);
  }
  SECTION("a matrix product with a fused bias and ReLU") {
    const auto b = random_gpu(std::array<std::int64_t, 1>{32}, 4);
    auto step = [&] { return et::eval(et::relu(et::matmul(x, w) + b)); };
    CHECK(test::sweep_allocation_failures("gpu matmul", et::cuda<0>, step, test::equals(step())) >= 1);
  }
  SECTION("a copy from the host") {
    const auto host = et::from_vector(et::cpu, test::random_values<float>(3000, 7), std::array<std::int64_t, 1>{3000});
    auto step = [&] { return host.to(et::cuda<0>); };
    CHECK(test::sweep_allocation_failures("gpu upload", et::cuda<0>, step, test::equals(step())) == 1);
  }
}

// Apart, and tagged [conv]: compute-sanitizer's initcheck leaves out the [conv] tests (scripts/gpu-check).
TEST_CASE("every allocation of a GPU convolution and pooling can fail the same way", "[faults][conv]") {
  const auto image = random_gpu(std::array<std::int64_t, 4>{2, 3, 9, 8}, 5);
  const auto filter = random_gpu(std::array<std::int64_t, 4>{5, 3, 3, 3}, 6);
  auto step = [&] {
    const auto y = et::conv2d(image, filter, {.padding = {1, 1}, .allow_tf32 = false});
    return et::max_pool2d(y, {.kernel = {2, 2}});
  };
  CHECK(test::sweep_allocation_failures("gpu conv2d + max_pool2d", et::cuda<0>, step, test::equals(step())) >= 2);
}

// --- A kernel that traps -------------------------------------------------------------------
//
// etensor's own kernels never trap: bad indices are caught on the host before any launch
// (docs/design.md, indexing). What can trap is a kernel of the user's own, queued on
// etensor's current stream beside etensor's work: here a device-side check on a tensor's
// values, as a user's assertion would be (__trap(), since assert() is compiled out under
// NDEBUG). After a trap the CUDA context is unusable for the rest of the process (a
// "sticky" error): every later CUDA call fails. etensor must report that as et::CudaError
// at its next call that reaches the driver, and at every one after it, and never crash.

namespace {

struct ChildRun {
  bool timed_out = false;
  int status = 0;  ///< waitpid's status
  std::string output;  ///< its stdout and stderr, interleaved
};

/// Runs this executable again (posix_spawn of /proc/self/exe: a fresh process, with a CUDA
/// context of its own; a fork() of a process that initialized CUDA could not use CUDA)
/// with `arguments` and `variable` set, and waits at most `limit` for it, then kills it.
ChildRun run_this_executable(const std::vector<std::string>& arguments, const std::string& variable,
                             std::chrono::seconds limit) {
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_ends[1], STDERR_FILENO);

  std::string program = "/proc/self/exe";
  std::vector<char*> argv{program.data()};
  std::vector<std::string> args = arguments;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string set = variable;
  std::vector<char*> envp{set.data()};
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_ends[1]);
  if (spawned != 0) close(pipe_ends[0]);
  INFO("posix_spawn: " << std::strerror(spawned));
  REQUIRE(spawned == 0);

  ChildRun run;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd readable{pipe_ends[0], POLLIN, 0};
    const int ready = poll(&readable, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline decides
    char buffer[4096];
    const ssize_t got = read(pipe_ends[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // end of output: the child closed it (exited)
    run.output.append(buffer, std::size_t(got));
  }
  close(pipe_ends[0]);
  while (waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
  }
  return run;
}

}  // namespace


// [cuda-error]: compute-sanitizer's runs leave it out (scripts/gpu-check): the child's trap
// would be their report.
TEST_CASE("a kernel that traps surfaces as et::CudaError in its process, which keeps failing cleanly",
          "[faults][cuda-error]") {
  const std::vector<float> host = test::random_values<float>(1 << 16, 12);
  const auto x = et::from_vector(et::cuda<0>, host);
  const auto expected = [&] {
    std::vector<double> out(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) out[i] = std::tanh(double(host[i])) * 0.5 + double(host[i]);
    return out;
  }();
  const auto close_to_expected = [&](const std::vector<float>& got) {
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      wrong += std::fabs(got[i] - expected[i]) > 1e-5 * (1 + std::fabs(expected[i]));
    return got.size() == expected.size() && wrong == 0;
  };
  CHECK(close_to_expected(et::eval(et::tanh(x) * 0.5f + x).to_vector()));

  const ChildRun child =
      run_this_executable({}, std::string(test::trap_child_variable) + "=1", std::chrono::seconds(60));
  INFO("the child's output:\n" << child.output);
  REQUIRE_FALSE(child.timed_out);
  const std::string signal = WIFSIGNALED(child.status) ? strsignal(WTERMSIG(child.status)) : "none";
  CAPTURE(signal);
  CHECK_FALSE(WIFSIGNALED(child.status));  // no crash (std::terminate's abort, a segfault), before or at exit
  REQUIRE(WIFEXITED(child.status));
  CHECK(WEXITSTATUS(child.status) == 0);  // every expectation of trap_child_main held
  using Catch::Matchers::Contains;
  CHECK_THAT(child.output, Contains("trap-child: first error: et::CudaError") && Contains("trap-child: done") &&
                               !Contains("trap-child: FAILED"));

  // The trap stayed in the child's context: this process's GPU work goes on, right.
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  CHECK(close_to_expected(et::eval(et::tanh(x) * 0.5f + x).to_vector()));
  et::synchronize(et::cuda<0>);
}
