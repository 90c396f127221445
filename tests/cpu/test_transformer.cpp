// Transformer pieces on the CPU: layer normalization and its residual form, nn::LayerNorm,
// nn::GELU's approximations (the cases are shared with the GPU tests:
// tests/common/layer_norm_cases.hpp).
#include "../common/layer_norm_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("layer_norm and add_layer_norm against doubles, four types, gradients (CPU)", "[layer_norm]") {
  test::check_layer_norm_forms<et::Cpu>();
}
TEST_CASE("layer_norm: gradcheck, also through add_layer_norm (CPU)", "[layer_norm]") {
  test::check_layer_norm_gradcheck<et::Cpu>();
}
TEST_CASE("nn::LayerNorm, nn::GELU's approximations, errors (CPU)", "[layer_norm][modules]") {
  test::check_layer_norm_module_and_errors<et::Cpu>();
}
