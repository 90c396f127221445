// Mixed precision on the CPU (the cases are shared with the GPU tests: amp_cases.hpp, autocast_cases.hpp).
#include "../common/amp_cases.hpp"
#include "../common/autocast_cases.hpp"

#include <catch2/catch.hpp>

TEST_CASE("GradScaler skips, backs off and grows as PyTorch's, with SGD (CPU)", "[amp]") {
  test::check_scaler_with_sgd<et::Cpu>(0.0);
  test::check_scaler_with_sgd<et::Cpu>(0.9);
}
TEST_CASE("GradScaler: one overflowing optimizer of two, Adam, disabled, bad use (CPU)", "[amp]") {
  test::check_scaler_with_two_optimizers<et::Cpu>();
  test::check_scaler_with_adam<et::Cpu>();
  test::check_scaler_errors<et::Cpu>();
}
TEMPLATE_TEST_CASE("Autocast: types, values, the cast cache and the permission (CPU)", "[amp]", et::bfloat16, et::half) {
  test::check_autocast_types<et::Cpu, TestType>();
  test::check_autocast_values<et::Cpu, TestType>();
}
TEMPLATE_TEST_CASE("Autocast: a network's float gradients within 16-bit precision of float training (CPU)", "[amp]",
                   et::bfloat16, et::half) {
  test::check_autocast_gradients<et::Cpu, TestType>();
}
TEMPLATE_TEST_CASE("Autocast: float inputs of float modules computed in 16 bits, as PyTorch's autocast (CPU)", "[amp]",
                   et::bfloat16, et::half) {
  test::check_autocast_float_inputs<et::Cpu, TestType>();
}
TEMPLATE_TEST_CASE("Autocast: the cast cache across weights that reuse a freed block (CPU)", "[amp]", et::bfloat16,
                   et::half) {
  test::check_autocast_cache_reuse<et::Cpu, TestType>();
}
TEMPLATE_TEST_CASE("Autocast: the LSTM in 16 bits against the float LSTM (CPU)", "[amp][lstm]", et::bfloat16, et::half) {
  test::check_autocast_lstm<et::Cpu, TestType>();
}
