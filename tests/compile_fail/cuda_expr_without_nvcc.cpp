// In a file compiled by a plain C++ compiler, CUDA tensors can be created, copied and
// read (the control), but evaluating an expression on the GPU needs nvcc.
#include <et/et.hpp>

int main() {
  if (!et::cuda_available()) return 0;
  auto a = et::zeros<float>(et::cuda<0>, {4});
  auto host = a.to(et::cpu);
  (void)host;
#ifdef ET_FAIL
  et::Tensor<float, 1, et::Cuda<0>> b = a * 2.0f + 1.0f;
  (void)b;
#endif
}
