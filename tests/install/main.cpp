// A consumer of etensor: the README's first program, device chosen by et::try_gpu. In a
// file that nvcc does not compile it runs on the CPU; compiled as CUDA (the consumers
// under tests/consumers/ compile it so), on the first GPU where there is one.
#include <et/et.hpp>

#include <cstdio>

int main() {
  return et::try_gpu([](auto dev) {
    const auto x = et::arange<double>(dev, 5);
    const et::Tensor<double, 1, decltype(dev)> y = x * x + 1.0;
    const auto values = y.to_vector();
    std::printf("%s: %g %g\n", et::device_name<decltype(dev)>.c_str(), values.front(), values.back());
    return values.back() == 17.0 ? 0 : 1;
  });
}
