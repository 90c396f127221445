// Transformer pieces on a GPU: layer normalization (its vectorized and one-value-a-load
// kernels, the backward's column sums), add_layer_norm, nn::LayerNorm, nn::GELU
// scaled_dot_product_attention (tests/common/layer_norm_cases.hpp, attention_cases.hpp,
// shared with the CPU tests).
#include "../common/attention_cases.hpp"
#include "../common/layer_norm_cases.hpp"

#include <catch2/catch.hpp>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: layer_norm and add_layer_norm against doubles, four types, gradients", "[layer_norm]") {
  test::check_layer_norm_forms<Gpu>();
}
TEST_CASE("GPU: layer_norm: gradcheck, also through add_layer_norm", "[layer_norm]") {
  test::check_layer_norm_gradcheck<Gpu>();
}
TEST_CASE("GPU: nn::LayerNorm, nn::GELU's approximations, errors", "[layer_norm][modules]") {
  test::check_layer_norm_module_and_errors<Gpu>();
}
TEST_CASE("GPU: scaled_dot_product_attention against doubles, causal and not, edge shapes", "[attention]") {
  test::check_attention_forms<Gpu>();
}
TEST_CASE("GPU: scaled_dot_product_attention: gradcheck of q, k, v", "[attention]") {
  test::check_attention_gradients<Gpu>();
}
TEST_CASE("GPU: scaled_dot_product_attention: dropout's seeds, bad input", "[attention]") {
  test::check_attention_dropout_and_errors<Gpu>();
}
TEST_CASE("GPU: nn::MultiheadAttention: PyTorch's parameters, against doubles, batch_first, errors", "[attention][modules]") {
  test::check_multihead_attention<Gpu>();
}
