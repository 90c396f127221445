// A GradScaler stepping an optimizer of 16-bit parameters must not compile (mixed precision
// keeps float master weights); the control steps one of float parameters.
#include <et/nn.hpp>

int main() {
#ifdef ET_FAIL
  using P = et::half;
#else
  using P = float;
#endif
  auto w = et::zeros<P>(et::cpu, {4});
  w.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 0.1});
  et::amp::GradScaler<et::Cpu> scaler(et::cpu);
  if (w.numel() == 0) scaler.step(opt);  // never runs: the check is the compiler's
}
