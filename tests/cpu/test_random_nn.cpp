// Randomized differential tests on the CPU, continued (test_random.cpp has the others):
// convolution and pooling against double-precision loops (random_conv_cases.hpp), and
// autograd's gradients against directional differences (random_grad_cases.hpp; every
// differentiable operation on its own: random_op_grad_cases.hpp).
#include "../common/random_conv_cases.hpp"
#include "../common/random_grad_cases.hpp"
#include "../common/random_op_grad_cases.hpp"

TEST_CASE("random convolutions and their gradients match double precision on the CPU", "[random][conv]") {
  test::run_conv_family("cpu", et::cpu);
}

TEST_CASE("random poolings and their gradients match double precision on the CPU", "[random][pool]") {
  test::run_pool_family("cpu", et::cpu);
}

TEST_CASE("random gradients match directional differences on the CPU", "[random][grad]") {
  test::run_gradient_family("cpu", et::cpu);
}

TEST_CASE("random gradients of every differentiable operation match directional differences on the CPU",
          "[random][grad][op-grad]") {
  test::run_op_gradient_family("cpu", et::cpu);
}
