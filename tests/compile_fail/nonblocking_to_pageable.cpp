// A non-blocking copy from a GPU into pageable host memory must not compile; the control
// copies into pinned memory, which the first host read waits for by itself.
#include <et/et.hpp>

int main() {
  const et::Tensor<float, 1, et::Cuda<0>> gpu;
#ifdef ET_FAIL
  const auto host = gpu.to(et::cpu, et::non_blocking);
#else
  const auto host = gpu.to(et::pinned, et::non_blocking);
#endif
  return host.numel() == 0 ? 0 : 1;
}
