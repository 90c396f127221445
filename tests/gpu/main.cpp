// The GPU tests' entry point: on a machine without a CUDA device it says so and exits
// with 77, which CTest reports as "skipped" (SKIP_RETURN_CODE). With ET_TEST_TRAP_CHILD set
// it is the trap test's child process instead (trap_child.hpp), and runs no test case.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "trap_child.hpp"

#include <et/et.hpp>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (std::getenv(test::trap_child_variable)) return test::trap_child_main();
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  const auto& config = session.configData();
  const bool only_listing = config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters;
  if (!only_listing && !et::cuda_available()) {
    std::printf("SKIPPED: no CUDA device is visible to this process; the GPU tests need one\n");
    return 77;
  }
  return session.run();
}
