// A rank-2 expression cannot be assigned into a rank-1 tensor; a rank-1 expression
// into a rank-2 tensor broadcasts (the control).
#include <et/et.hpp>

int main() {
  et::Tensor<float, 1, et::Cpu> row;
  et::Tensor<float, 2, et::Cpu> matrix;
#ifdef ET_FAIL
  row = matrix + 1.0f;
#else
  matrix = row + 1.0f;
#endif
}
