// Transformer pieces on the CPU: layer normalization and its residual form, nn::LayerNorm,
// nn::GELU's approximations, scaled_dot_product_attention (the cases are shared with the GPU tests:
// tests/common/layer_norm_cases.hpp, attention_cases.hpp).
#include "../common/attention_cases.hpp"
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
TEST_CASE("scaled_dot_product_attention against doubles, causal and not, edge shapes (CPU)", "[attention]") {
  test::check_attention_forms<et::Cpu>();
}
TEST_CASE("scaled_dot_product_attention: gradcheck of q, k, v (CPU)", "[attention]") {
  test::check_attention_gradients<et::Cpu>();
}
TEST_CASE("scaled_dot_product_attention: dropout's seeds, bad input (CPU)", "[attention]") {
  test::check_attention_dropout_and_errors<et::Cpu>();
}
TEST_CASE("nn::MultiheadAttention: PyTorch's parameters, against doubles, batch_first, errors (CPU)", "[attention][modules]") {
  test::check_multihead_attention<et::Cpu>();
}
