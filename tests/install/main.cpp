#include <et/et.hpp>

#include <cstdio>

int main() {
  const auto x = et::arange<double>(et::cpu, 5);
  const et::Tensor<double, 1> y = x * x + 1.0;
  const auto values = y.to_vector();
  std::printf("%g %g\n", values.front(), values.back());
  return values.back() == 17.0 ? 0 : 1;
}
