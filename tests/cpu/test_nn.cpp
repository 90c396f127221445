// Losses on the CPU (the cases are shared with the GPU tests: loss_cases.hpp).
#include "../common/loss_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("losses: values, gradients and errors (CPU)", "[nn][loss]") { test::check_losses<et::Cpu>(); }
