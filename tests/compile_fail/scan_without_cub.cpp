// cumsum, sort and topk on a GPU use CUB, which et/et.hpp includes only where the file
// defines ET_WITH_CUB (its headers cost about 6 s of nvcc time): without it (ET_FAIL) the
// call is a compile error that says what to define; with it (the control) it compiles.
#if !defined(ET_FAIL)
#define ET_WITH_CUB 1
#endif
#include <et/et.hpp>

int main() {
  if (!et::cuda_available()) return 0;
  const auto a = et::zeros<float>(et::cuda<0>, {4});
  const auto sums = et::cumsum(a, 0);
  (void)sums;
}
