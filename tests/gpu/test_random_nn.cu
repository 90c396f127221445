// Randomized differential tests on the GPU, continued (test_random.cu has the others):
// convolution and pooling (cuDNN) against double-precision loops, and autograd's gradients
// against directional differences. The convolution family stops at 10^4 cases (each is a
// new cuDNN configuration); the others take ET_RANDOM_CASES (on an H200, 10^5 pooling cases
// took 15 s, 10^4 gradient cases 6 s).
#include "../cpu/random_conv_cases.hpp"
#include "../cpu/random_grad_cases.hpp"

// [slow]: cuDNN's plan searches for 3 x 10^4 configurations (272 s on an H200), left out of
// gpu-check's sanitizer runs; [long]: gpu-check runs it in a step of its own.
TEST_CASE("random convolutions and their gradients match double precision on the GPU",
          "[random][conv][slow][long]") {
  test::run_conv_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random poolings and their gradients match double precision on the GPU", "[random][pool]") {
  test::run_pool_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random gradients match directional differences on the GPU", "[random][grad]") {
  test::run_gradient_family("cuda:0", et::cuda<0>);
}
