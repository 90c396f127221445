// Optimizers on the CPU (the cases are shared with the GPU tests: optim_cases.hpp).
#include "optim_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("optimizers follow PyTorch's update rules (CPU)", "[optim]") { test::check_optimizers<et::Cpu>(); }
TEST_CASE("updates overlapped with the backward equal step() after it (CPU)", "[optim]") {
  test::check_overlapped_steps<et::Cpu>();
}
