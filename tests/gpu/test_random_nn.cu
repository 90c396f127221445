// Randomized differential tests on the GPU, continued (test_random.cu has the others):
// convolution and pooling (cuDNN) against double-precision loops. The convolution family
// stops at 10^4 cases (each is a new cuDNN configuration); the others take ET_RANDOM_CASES.
#include "../cpu/random_conv_cases.hpp"

// [slow]: cuDNN's plan searches for 3 x 10^4 configurations; gpu-check's console run has it,
// its sanitizer runs leave it out.
TEST_CASE("random convolutions and their gradients match double precision on the GPU", "[random][conv][slow]") {
  test::run_conv_family("cuda:0", et::cuda<0>);
}

TEST_CASE("random poolings and their gradients match double precision on the GPU", "[random][pool]") {
  test::run_pool_family("cuda:0", et::cuda<0>);
}
