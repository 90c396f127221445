// Optimizers on the CPU (the cases are shared with the GPU tests: optim_cases.hpp).
#include "../common/fold_cases.hpp"
#include "../common/optim_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("optimizers follow PyTorch's update rules (CPU)", "[optim]") { test::check_optimizers<et::Cpu>(); }
TEST_CASE("AdamW's parameter groups and its capturable form (CPU)", "[optim]") { test::check_adam_groups<et::Cpu>(); }
TEST_CASE("clip_grad_norm_: the norm of every gradient, then scaled (CPU)", "[optim][clip]") {
  test::check_clip_grad_norm<et::Cpu>();
}
TEST_CASE("updates overlapped with the backward equal step() after it (CPU)", "[optim]") {
  test::check_overlapped_steps<et::Cpu>();
}
TEMPLATE_TEST_CASE("a scaled GEMM adds alpha a @ b to beta out (CPU)", "[optim][matmul]", float, double) {
  test::check_scaled_gemm<et::Cpu, TestType>();
}
TEST_CASE("SGD's step folds into the weight-gradient GEMM where it can (CPU)", "[optim]") {
  test::check_folded_steps<et::Cpu>();
}
