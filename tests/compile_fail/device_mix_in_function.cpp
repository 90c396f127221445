// The device check covers every operand of every function, deep in a tree and inside a
// user's function template: here the third argument of where() lives on cuda:3. The
// report stays short: one more "required from" line, for the user's template. The result
// is reduced: nothing the reduction instantiates adds to the report.
#include <et/et.hpp>

template <class X, class B>
auto activation(const X& x, const B& bias) {
  return et::where(x > 0.0f, et::tanh(x), et::relu(x) + bias);
}

int main() {
  const et::Tensor<float, 2, et::Cpu> x;
#ifdef ET_FAIL
  const et::Tensor<float, 1, et::Cuda<3>> bias;
#else
  const et::Tensor<float, 1, et::Cpu> bias;
#endif
  auto e = et::sum(activation(x, bias), 1);
  (void)e;
}
