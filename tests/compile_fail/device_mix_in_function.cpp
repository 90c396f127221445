// The device check covers every operand of every function, deep in a tree: here the
// third argument of where() lives on cuda:3.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 2, et::Cpu> x;
#ifdef ET_FAIL
  const et::Tensor<float, 1, et::Cuda<3>> bias;
#else
  const et::Tensor<float, 1, et::Cpu> bias;
#endif
  auto e = et::where(x > 0.0f, et::tanh(x), et::relu(x) + bias);
  (void)e;
}
