// Only floating-point tensors can require grad: an integer tensor is refused at compile
// time; the control marks a float tensor.
#include <et/et.hpp>

#include <cstdint>

int main() {
#ifdef ET_FAIL
  auto n = et::zeros<std::int32_t>(et::cpu, {3});
#else
  auto n = et::zeros<float>(et::cpu, {3});
#endif
  n.requires_grad_(true);
}
