// The GPU tests' entry point: on a machine without a CUDA device it says so and exits
// with 77, which CTest reports as "skipped" (SKIP_RETURN_CODE).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cstdio>

int main(int argc, char** argv) {
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
