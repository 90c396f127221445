// A matrix product of a CPU matrix and a cuda:0 matrix must not compile; the control
// multiplies two CPU matrices.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 2, et::Cpu> x;
#ifdef ET_FAIL
  const et::Tensor<float, 2, et::Cuda<0>> w;
#else
  const et::Tensor<float, 2, et::Cpu> w;
#endif
  auto product = et::matmul(x, w);
  (void)product;
}
