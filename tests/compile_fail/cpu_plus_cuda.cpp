// Adding a CPU tensor to a cuda:0 tensor must not compile; the control adds two CPU tensors.
// The sum is evaluated: the report is the mixing's alone, nothing instantiated by the
// evaluation (its recording for autograd, a CUDA operand's copies) adds to it.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 1, et::Cpu> a;
#ifdef ET_FAIL
  const et::Tensor<float, 1, et::Cuda<0>> b;
#else
  const et::Tensor<float, 1, et::Cpu> b;
#endif
  auto sum = et::eval(a + b * 2.0f);
  (void)sum;
}
