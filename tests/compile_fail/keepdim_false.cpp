// keepdim changes the rank, which is part of the type: `true` is accepted (the control),
// a literal `false` is a compile error that points to the two-argument form.
#include <et/et.hpp>

int main() {
  const auto x = et::zeros<float>(et::cpu, {2, 3});
#ifdef ET_FAIL
  auto s = et::sum(x, 1, false);
#else
  auto s = et::sum(x, 1, true);
#endif
  (void)s;
}
