// conv2d on pinned (staging) memory must not compile, with a message that says what to do;
// the control copies to the CPU first.
#include <et/et.hpp>

int main() {
  const auto x = et::ones<float>(et::pinned, {1, 2, 5, 5});
  const auto w = et::ones<float>(et::cpu, {3, 2, 3, 3});
#ifdef ET_FAIL
  const auto y = et::conv2d(x, w);
#else
  const auto y = et::conv2d(x.to(et::cpu), w);
#endif
  return y.numel() == 27 ? 0 : 1;
}
