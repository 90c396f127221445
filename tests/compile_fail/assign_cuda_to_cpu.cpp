// Assigning a cuda:0 expression to a CPU tensor must not compile; the control copies
// across explicitly with .to(et::cpu).
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 1, et::Cuda<0>> gpu;
  et::Tensor<float, 1, et::Cpu> host;
#ifdef ET_FAIL
  host = gpu;
#else
  host = gpu.to(et::cpu) + 1.0f;
#endif
}
