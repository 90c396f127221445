// A non-blocking copy from pageable host memory to a GPU must not compile (PyTorch makes it
// silently synchronous); the control pins the source first.
#include <et/et.hpp>

int main() {
  const auto host = et::zeros<float>(et::cpu, {16});
#ifdef ET_FAIL
  const auto gpu = host.to(et::cuda<0>, et::non_blocking);
#else
  const auto gpu = host.pin().to(et::cuda<0>, et::non_blocking);
#endif
  return gpu.numel() == 16 ? 0 : 1;
}
