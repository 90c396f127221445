// softmax, log_softmax and logsumexp on the CPU (the cases: softmax_cases.hpp).
#include "../common/softmax_cases.hpp"

TEST_CASE("softmax, log_softmax and logsumexp match a long double reference", "[softmax]") {
  test::check_row_op_shapes<et::Cpu, double>();
  test::check_row_op_shapes<et::Cpu, float>();
  test::check_row_op_shapes<et::Cpu, et::half>();
  test::check_row_op_shapes<et::Cpu, et::bfloat16>();
}

TEST_CASE("softmax of transposed inputs and expressions", "[softmax]") { test::check_row_op_layouts<et::Cpu>(); }

TEST_CASE("softmax with infinities and NaN", "[softmax]") { test::check_row_op_special_values<et::Cpu>(); }

TEST_CASE("softmax errors", "[softmax][errors]") { test::check_row_op_errors<et::Cpu>(); }
