// A convolution of a CPU input with a cuda:0 weight must not compile; the control
// convolves two CPU tensors (shapes are only checked at run time, which never comes).
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 4, et::Cpu> x;
#ifdef ET_FAIL
  const et::Tensor<float, 4, et::Cuda<0>> w;
#else
  const et::Tensor<float, 4, et::Cpu> w;
#endif
  if (x.defined()) {
    auto y = et::conv2d(x, w, {.padding = {1, 1}});
    (void)y;
  }
}
