// Randomized differential tests on the GPU, continued (test_random.cu has the others):
// convolution and pooling (cuDNN) against double-precision loops, and autograd's gradients
// against directional differences (seven functions in four types; every differentiable
// operation on its own in double). The convolution family stops at 10^4 cases (each is a
// new cuDNN configuration); the others take ET_RANDOM_CASES (on an H200, 10^5 pooling cases
// took 15 s, 10^4 gradient cases 6 s).
#define ET_WITH_CUB 1  // cumsum, sort and topk on the GPU (ops/scan.hpp), for the operations' family
#include "../common/random_conv_cases.hpp"
#include "../common/random_grad_cases.hpp"
#include "../common/random_op_grad_cases.hpp"

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

// [long]: gpu-check runs it in the step of its own with the convolutions, away from the
// 300 s of the other GPU tests (its time on a GPU is not measured yet: each of its 10^5
// cases is one backward and two to eight forward evaluations, each waiting for its loss).
TEST_CASE("random gradients of every differentiable operation match directional differences on the GPU",
          "[random][grad][op-grad][long]") {
  test::run_op_gradient_family("cuda:0", et::cuda<0>);
}
