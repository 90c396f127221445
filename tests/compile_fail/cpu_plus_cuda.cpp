// Adding a CPU tensor to a cuda:0 tensor must not compile; the control adds two CPU tensors.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 1, et::Cpu> a;
#ifdef ET_FAIL
  const et::Tensor<float, 1, et::Cuda<0>> b;
#else
  const et::Tensor<float, 1, et::Cpu> b;
#endif
  auto sum = a + b * 2.0f;
  (void)sum;
}
