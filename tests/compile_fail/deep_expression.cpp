// A deep expression compiles: 63 levels of the chain form e_k = e_(k-1) * a / b * (b - a)
// (252 operations), assigned with its autograd recording compiled in (checked at run time).
// g++'s template depth limit is 900: each tree level may cost only a few instantiation
// levels in every walk over the expression (bench/compile_time.sh times the same chain).
#include <et/et.hpp>

void chain(et::Tensor<float, 1, et::Cpu>& out, const et::Tensor<float, 1, et::Cpu>& x,
           const et::Tensor<float, 1, et::Cpu>& a, const et::Tensor<float, 1, et::Cpu>& b) {
  auto e1 = x * a / b * (b - a);
  auto e2 = e1 * a / b * (b - a);
  auto e3 = e2 * a / b * (b - a);
  auto e4 = e3 * a / b * (b - a);
  auto e5 = e4 * a / b * (b - a);
  auto e6 = e5 * a / b * (b - a);
  auto e7 = e6 * a / b * (b - a);
  auto e8 = e7 * a / b * (b - a);
  auto e9 = e8 * a / b * (b - a);
  auto e10 = e9 * a / b * (b - a);
  auto e11 = e10 * a / b * (b - a);
  auto e12 = e11 * a / b * (b - a);
  auto e13 = e12 * a / b * (b - a);
  auto e14 = e13 * a / b * (b - a);
  auto e15 = e14 * a / b * (b - a);
  auto e16 = e15 * a / b * (b - a);
  auto e17 = e16 * a / b * (b - a);
  auto e18 = e17 * a / b * (b - a);
  auto e19 = e18 * a / b * (b - a);
  auto e20 = e19 * a / b * (b - a);
  auto e21 = e20 * a / b * (b - a);
  auto e22 = e21 * a / b * (b - a);
  auto e23 = e22 * a / b * (b - a);
  auto e24 = e23 * a / b * (b - a);
  auto e25 = e24 * a / b * (b - a);
  auto e26 = e25 * a / b * (b - a);
  auto e27 = e26 * a / b * (b - a);
  auto e28 = e27 * a / b * (b - a);
  auto e29 = e28 * a / b * (b - a);
  auto e30 = e29 * a / b * (b - a);
  auto e31 = e30 * a / b * (b - a);
  auto e32 = e31 * a / b * (b - a);
  auto e33 = e32 * a / b * (b - a);
  auto e34 = e33 * a / b * (b - a);
  auto e35 = e34 * a / b * (b - a);
  auto e36 = e35 * a / b * (b - a);
  auto e37 = e36 * a / b * (b - a);
  auto e38 = e37 * a / b * (b - a);
  auto e39 = e38 * a / b * (b - a);
  auto e40 = e39 * a / b * (b - a);
  auto e41 = e40 * a / b * (b - a);
  auto e42 = e41 * a / b * (b - a);
  auto e43 = e42 * a / b * (b - a);
  auto e44 = e43 * a / b * (b - a);
  auto e45 = e44 * a / b * (b - a);
  auto e46 = e45 * a / b * (b - a);
  auto e47 = e46 * a / b * (b - a);
  auto e48 = e47 * a / b * (b - a);
  auto e49 = e48 * a / b * (b - a);
  auto e50 = e49 * a / b * (b - a);
  auto e51 = e50 * a / b * (b - a);
  auto e52 = e51 * a / b * (b - a);
  auto e53 = e52 * a / b * (b - a);
  auto e54 = e53 * a / b * (b - a);
  auto e55 = e54 * a / b * (b - a);
  auto e56 = e55 * a / b * (b - a);
  auto e57 = e56 * a / b * (b - a);
  auto e58 = e57 * a / b * (b - a);
  auto e59 = e58 * a / b * (b - a);
  auto e60 = e59 * a / b * (b - a);
  auto e61 = e60 * a / b * (b - a);
  auto e62 = e61 * a / b * (b - a);
  auto e63 = e62 * a / b * (b - a);
  out = e63;
}

int main() {
  auto x = et::ones<float>(et::cpu, {4});
  chain(x, x, x, x);
}
