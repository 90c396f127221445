// In a file compiled by a plain C++ compiler, conv2d of CPU tensors compiles (the
// control); on CUDA tensors it needs nvcc (it packs operands and adds the bias with
// etensor kernels), and says so.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 4, et::Cpu> x, w;
  if (x.defined()) (void)et::conv2d(x, w);
#ifdef ET_FAIL
  const et::Tensor<float, 4, et::Cuda<0>> xg, wg;
  if (xg.defined()) (void)et::conv2d(xg, wg);
#endif
}
