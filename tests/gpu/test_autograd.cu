// Autograd on the GPU: the gradient checks of tests/common/autograd_cases.hpp on CUDA, and
// the fused backward's kernel count, from CUPTI: the backward of one recorded expression
// is ONE kernel for all of its inputs, plus one reduction per broadcast input; a stack of
// linear layers backpropagates through cuBLASLt calls alone.
#include "../common/autograd_cases.hpp"
#include "../common/version_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: the seed's worked example", "[autograd]") { test::check_seed_example<Gpu>(); }
TEST_CASE("GPU: in-place operations on recorded tensors read the values they overwrite", "[autograd][matmul]") {
  test::check_in_place_writes<Gpu>();
}
TEST_CASE("GPU: writes into views are recorded", "[autograd]") { test::check_view_writes<Gpu>(); }

TEST_CASE("GPU: gradients of elementwise functions and operators", "[autograd]") {
  test::check_elementwise_gradients<Gpu>();
}
TEST_CASE("GPU: gradients through broadcasting, views inside expressions, empty tensors", "[autograd]") {
  test::check_broadcast_gradients<Gpu>();
}
TEST_CASE("GPU: gradients of reductions", "[autograd]") { test::check_reduction_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of views and copies", "[autograd]") { test::check_view_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of matmul", "[autograd][matmul]") { test::check_matmul_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of linear layers", "[autograd][matmul]") { test::check_linear_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of conv2d and pooling", "[autograd][conv]") { test::check_nn_gradients<Gpu>(); }
TEST_CASE("GPU: each op family's backward notices a saved tensor written in place", "[autograd][version]") {
  SECTION("matmul and linear layers") { test::check_matmul_versions<Gpu>(); }
  SECTION("fused expressions and reductions") { test::check_fused_and_reduction_versions<Gpu>(); }
  SECTION("softmax, log_softmax, logsumexp") { test::check_softmax_versions<Gpu>(); }
  SECTION("conv2d, max_pool2d, cross_entropy") { test::check_nn_versions<Gpu>(); }
  SECTION("inputs that need no gradient, written through any handle") { test::check_untracked_versions<Gpu>(); }
  SECTION("tensors of no elements") { test::check_empty_versions<Gpu>(); }
}

TEST_CASE("GPU: the backward of a fused expression is one kernel for all its inputs", "[autograd][cupti]") {
  const std::int64_t n = 1 << 20;
  auto x = et::rand<float>(et::cuda<0>, {n}, 1), y = et::rand<float>(et::cuda<0>, {n}, 2),
       w = et::rand<float>(et::cuda<0>, {n}, 3);
  x.requires_grad_(true);
  y.requires_grad_(true);
  w.requires_grad_(true);
  const et::Tensor<float, 1, Gpu> z = et::sin(x * y) + et::exp(w) * x - y / (w + 2.0f);
  const auto g = et::ones<float>(et::cuda<0>, {n});
  test::LaunchCounter counter;
  z.backward(g);
  const test::Launches seen = counter.stop();
  CHECK(seen.kernels() == 1);
  // The gradients themselves (dz/dx = y cos(xy) + e^w, ...), checked on the host.
  const auto xs = x.detach().to_vector(), ys = y.detach().to_vector(), ws = w.detach().to_vector();
  const auto gx = x.grad().to_vector(), gy = y.grad().to_vector(), gw = w.grad().to_vector();
  for (std::size_t i = 0; i < xs.size(); i += 4099) {
    const double a = xs[i], b = ys[i], c = ws[i];
    CHECK(gx[i] == Approx(b * std::cos(a * b) + std::exp(c)).epsilon(1e-5));
    CHECK(gy[i] == Approx(a * std::cos(a * b) - 1 / (c + 2)).epsilon(1e-5));
    CHECK(gw[i] == Approx(std::exp(c) * a + b / ((c + 2) * (c + 2))).epsilon(1e-5));
  }
}

TEST_CASE("GPU: a broadcast input adds one reduction to the fused backward", "[autograd][cupti]") {
  auto x = et::rand<float>(et::cuda<0>, {512, 256}, 4);
  auto b = et::rand<float>(et::cuda<0>, {256}, 5);
  x.requires_grad_(true);
  b.requires_grad_(true);
  const et::Tensor<float, 2, Gpu> z = et::tanh(x + b);
  const auto g = et::ones<float>(et::cuda<0>, {512, 256});
  std::size_t reduction_kernels = 0;
  {
    const auto staged = et::ones<float>(et::cuda<0>, {256, 512});
    test::LaunchCounter counter;
    (void)et::sum(staged, 1);
    reduction_kernels = counter.stop().kernels();
  }
  test::LaunchCounter counter;
  z.backward(g);
  CHECK(counter.stop().kernels() == 1 + reduction_kernels);
}

namespace {

/// Host values in {-1, 1}, or with `offset` integers + offset in [-8, 8]: every
/// pre-activation of the stack below is then exact in float, and the ReLU layer's (biases:
/// even integers) is exactly 0 at some elements, where its derivative must be 0.
std::vector<double> signs(std::size_t n, unsigned seed, std::optional<double> offset = {}) {
  std::mt19937 random(seed);
  std::vector<double> v(n);
  for (double& x : v) x = offset ? double(random() % 8) * 2 - 8 + *offset : random() % 2 ? 1.0 : -1.0;
  return v;
}

/// relu(x @ w1 + b1) -> gelu_tanh(. @ w2 + b2) -> . @ w3^T + b3 (w3 laid out as Linear's), on D.
template <class T, class D>
struct LinearStack {
  et::Tensor<T, 2, D> x, w1, w2, w3;
  et::Tensor<T, 1, D> b1, b2, b3;
  LinearStack() {
    auto matrix = [](std::int64_t r, std::int64_t c, unsigned seed) {
      const auto v = signs(std::size_t(r * c), seed);
      return et::from_vector(D{}, std::vector<T>(v.begin(), v.end()), std::array<std::int64_t, 2>{r, c});
    };
    auto vector = [](std::int64_t n, unsigned seed, double offset) {
      const auto v = signs(std::size_t(n), seed, offset);
      return et::from_vector(D{}, std::vector<T>(v.begin(), v.end()), std::array<std::int64_t, 1>{n});
    };
    x = matrix(64, 96, 1), w1 = matrix(96, 128, 2), w2 = matrix(128, 80, 3), w3 = matrix(40, 80, 4);
    b1 = vector(128, 5, 0.0), b2 = vector(80, 6, 0.5), b3 = vector(40, 7, 0.5);
    for (auto* p : {&w1, &w2, &w3}) p->requires_grad_(true);
    for (auto* p : {&b1, &b2, &b3}) p->requires_grad_(true);
  }
  et::Tensor<T, 2, D> forward() const {
    const et::Tensor<T, 2, D> h1 = et::relu(et::matmul(x, w1) + b1);
    const et::Tensor<T, 2, D> h2 = et::gelu_tanh(et::matmul(h1, w2) + b2);
    return et::matmul(h2, w3.transpose(0, 1)) + b3;
  }
};

template <int R>
double relative_difference(const et::Tensor<float, R, Gpu>& got, const et::Tensor<double, R, et::Cpu>& want) {
  const std::vector<float> g = got.to_vector();
  const std::vector<double> w = want.to_vector();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < w.size(); ++i) diff = std::max(diff, std::abs(g[i] - w[i])), scale = std::max(scale, std::abs(w[i]));
  return diff / std::max(scale, 1.0);
}

}  // namespace

TEST_CASE("GPU: a stack of linear layers backpropagates through its GEMMs, the GELU derivative and the bias "
          "gradients in their epilogues",
          "[autograd][matmul][cupti]") {
  LinearStack<float, Gpu> gpu;
  LinearStack<double, et::Cpu> cpu;
  {
    et::NoGradGuard no_grad;  // the ReLU layer's pre-activations include exact zeros
    const et::Tensor<double, 2, et::Cpu> z1 = et::matmul(cpu.x, cpu.w1) + cpu.b1;
    REQUIRE(et::sum(et::cast<double>(z1 == 0.0)).item() > 0);
  }
  auto& counters = et::detail::gemm_counters();
  const std::int64_t fused_before_forward = counters.fused_epilogues.load();
  const auto out = gpu.forward();
  // RELU_BIAS, GELU_AUX_BIAS, BIAS: one cuBLASLt call per layer.
  CHECK(counters.fused_epilogues.load() - fused_before_forward == 3);
  const auto seed = signs(std::size_t(out.numel()), 8);
  const auto g = et::from_vector(et::cuda<0>, std::vector<float>(seed.begin(), seed.end()), out.shape());
  const std::int64_t fused_before = counters.fused_epilogues.load(), calls_before = counters.lt_matmuls.load();
  test::LaunchCounter counter;
  out.backward(g);
  const test::Launches seen = counter.stop();
  // Layer 3: dx with DGELU_BGRAD (layer 2's derivative and bias gradient), dw with BGRAD;
  // layer 2: dx, dw; layer 1: the ReLU derivative (the one kernel of ours), dw with BGRAD
  // (x needs no gradient).
  CHECK(counters.lt_matmuls.load() - calls_before == 5);
  CHECK(counters.fused_epilogues.load() - fused_before == 3);
  std::size_t ours = 0;
  for (const std::string& name : seen.kernel_names) {
    INFO(name);
    ours += name.rfind("_ZN2et", 0) == 0;  // a kernel of namespace et (cuBLASLt's are not)
  }
  CHECK(ours == 1);
  cpu.forward().backward(et::from_vector(et::cpu, seed, out.shape()));
  CHECK(relative_difference(gpu.w1.grad(), cpu.w1.grad()) < 2e-3);
  CHECK(relative_difference(gpu.w2.grad(), cpu.w2.grad()) < 2e-3);
  CHECK(relative_difference(gpu.w3.grad(), cpu.w3.grad()) < 2e-3);
  CHECK(relative_difference(gpu.b1.grad(), cpu.b1.grad()) < 2e-3);
  CHECK(relative_difference(gpu.b2.grad(), cpu.b2.grad()) < 2e-3);
  CHECK(relative_difference(gpu.b3.grad(), cpu.b3.grad()) < 2e-3);
}
