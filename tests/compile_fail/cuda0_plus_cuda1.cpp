// Tensors on two different GPUs cannot meet in one expression; the control uses one GPU.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 2, et::Cuda<0>> a;
#ifdef ET_FAIL
  const et::Tensor<float, 2, et::Cuda<1>> b;
#else
  const et::Tensor<float, 2, et::Cuda<0>> b;
#endif
  auto e = et::exp(a) * b;
  (void)e;
}
