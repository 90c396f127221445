// A module on the CPU called with a cuda:0 tensor must not compile; the control calls it
// with a CPU tensor (sizes are only checked at run time, which never comes).
#include <et/nn.hpp>

int main() {
  et::nn::Linear<float, et::Cpu> fc;
#ifdef ET_FAIL
  const et::Tensor<float, 2, et::Cuda<0>> x;
#else
  const et::Tensor<float, 2, et::Cpu> x;
#endif
  if (x.defined()) {
    auto y = fc(x);
    (void)y;
  }
}
