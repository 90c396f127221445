// A floating-point expression does not silently truncate into an integer tensor;
// the control says so with et::cast.
#include <et/et.hpp>

#include <cstdint>

int main() {
  const et::Tensor<float, 1, et::Cpu> x;
#ifdef ET_FAIL
  et::Tensor<std::int32_t, 1, et::Cpu> n = x * 2.0f;
#else
  et::Tensor<std::int32_t, 1, et::Cpu> n = et::cast<std::int32_t>(x * 2.0f);
#endif
  (void)n;
}
