// Autograd on the CPU: gradient checks of every differentiable operation
// (autograd_cases.hpp, shared with the GPU tests) and the semantics a PyTorch user relies
// on: accumulation, zero_grad, NoGradGuard, detach, retain_graph, version counters, errors.
#include "../common/autograd_cases.hpp"
#include "../common/version_cases.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <pthread.h>

#include <exception>
#include <memory>
#include <thread>
#include <vector>

using et::Cpu;

TEST_CASE("the seed's worked example: y = mean((x + 2)^2 + 3) at x = [0, 1, 2]", "[autograd]") {
  test::check_seed_example<Cpu>();
}

TEST_CASE("gradients of elementwise functions and operators (CPU)", "[autograd]") {
  test::check_elementwise_gradients<Cpu>();
}
TEST_CASE("gradients through broadcasting, views inside expressions, empty tensors (CPU)", "[autograd]") {
  test::check_broadcast_gradients<Cpu>();
}
TEST_CASE("gradients of reductions (CPU)", "[autograd]") { test::check_reduction_gradients<Cpu>(); }
TEST_CASE("gradients of views and copies (CPU)", "[autograd]") { test::check_view_gradients<Cpu>(); }
TEST_CASE("gradients of matmul (CPU)", "[autograd]") { test::check_matmul_gradients<Cpu>(); }
TEST_CASE("gradients of linear layers (CPU)", "[autograd]") { test::check_linear_gradients<Cpu>(); }
TEST_CASE("gradients of conv2d and pooling (CPU)", "[autograd]") { test::check_nn_gradients<Cpu>(); }

TEST_CASE("a linear layer act(x @ w + b) is one recorded node, which notices its output written in place",
          "[autograd]") {
  auto x = et::rand<double>(et::cpu, {4, 3}, 1), w = et::rand<double>(et::cpu, {3, 5}, 2);
  auto b = et::rand<double>(et::cpu, {5}, 3);
  w.requires_grad_(true);
  b.requires_grad_(true);
  et::Tensor<double, 2, Cpu> h = et::relu(et::matmul(x, w) + b);
  CHECK(dynamic_cast<et::detail::LinearBackward<double, Cpu>*>(h.autograd_meta()->grad_fn.get()) != nullptr);
  {
    et::NoGradGuard no_grad;
    h += 1.0;  // the ReLU derivative reads the output's sign
  }
  CHECK_THROWS_WITH(h.backward(et::ones<double>(et::cpu, {4, 5})),
                    Catch::Contains("linear layer relu(matmul + bias)") && Catch::Contains("modified in place"));
  // Written into an existing tensor, the same expression takes the general path (a product
  // node and an elementwise one), with the same gradients.
  const et::Tensor<double, 2, Cpu> fresh = et::relu(et::matmul(x, w) + b);
  et::sum(fresh).backward();
  const auto want_w = w.grad().clone();
  const auto want_b = b.grad().clone();
  w.zero_grad(), b.zero_grad();
  et::Tensor<double, 2, Cpu> existing = et::zeros<double>(et::cpu, {4, 5});
  existing = et::relu(et::matmul(x, w) + b);
  CHECK(dynamic_cast<et::detail::LinearBackward<double, Cpu>*>(existing.autograd_meta()->grad_fn.get()) == nullptr);
  et::sum(existing).backward();
  CHECK(et::max(et::abs(w.grad() - want_w)).item() < 1e-12);
  CHECK(et::max(et::abs(b.grad() - want_b)).item() < 1e-12);
}

TEST_CASE("ties and zeros follow PyTorch's conventions", "[autograd]") {
  auto x = et::from_vector(et::cpu, std::vector<double>{1, 3, 3, 2}, {4});
  x.requires_grad_(true);
  et::max(x).backward();  // all elements: the tied maxima share the gradient
  CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0.5, 0});
  x.zero_grad();
  et::max(x.view({1, 4}), 1).backward(et::ones<double>(et::cpu, {1}));  // one axis: the first maximum
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 0, 0});
  x.zero_grad();
  et::sum(et::maximum(x, 3.0)).backward();  // maximum: a tie splits in halves
  CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0.5, 0});
  x.zero_grad();
  et::sum(et::relu(x - 3.0) + et::abs(x - 3.0)).backward();  // relu'(0) = abs'(0) = 0
  CHECK(x.grad().to_vector() == std::vector<double>{-1, 0, 0, -1});
  auto z = et::from_vector(et::cpu, std::vector<double>{2, 0, 3}, {3});
  z.requires_grad_(true);
  et::prod(z).backward();  // one zero: only it gets the product of the others
  CHECK(z.grad().to_vector() == std::vector<double>{0, 6, 0});
}

TEST_CASE("a fused expression is one recorded node; gradients of one tensor used twice add up", "[autograd]") {
  auto x = et::from_vector(et::cpu, std::vector<double>{1, 2}, {2});
  auto w = et::from_vector(et::cpu, std::vector<double>{3, 4}, {2});
  x.requires_grad_(true);
  w.requires_grad_(true);
  et::Tensor<double, 1> z = x * w + x * x;  // dz/dx = w + 2x, dz/dw = x
  z.backward(et::ones<double>(et::cpu, {2}));
  CHECK(x.grad().to_vector() == std::vector<double>{5, 8});
  CHECK(w.grad().to_vector() == std::vector<double>{1, 2});
}

TEST_CASE("a float tensor's gradient through a cast to double is float", "[autograd]") {
  auto x = et::from_vector(et::cpu, std::vector<float>{1, 2}, {2});
  x.requires_grad_(true);
  et::sum(et::cast<double>(x) * 3.0).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{3, 3});
}

TEST_CASE("grad() accumulates across backward calls until zero_grad()", "[autograd]") {
  auto x = et::from_vector(et::cpu, std::vector<float>{1, 2}, {2});
  x.requires_grad_(true);
  CHECK_FALSE(x.grad().defined());
  et::sum(x * 3.0f).backward();
  et::sum(x * 3.0f).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{6, 6});
  const auto held = x.grad();
  x.zero_grad();
  CHECK(held.to_vector() == std::vector<float>{0, 0});  // in place: handles see the zeros
  et::sum(x).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{1, 1});
}

TEST_CASE("NoGradGuard stops recording; detach() cuts the graph", "[autograd]") {
  auto x = et::ones<float>(et::cpu, {3});
  x.requires_grad_(true);
  {
    et::NoGradGuard guard;
    CHECK_FALSE(et::grad_enabled());
    const et::Tensor<float, 1> y = x * 2.0f;
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(et::grad_enabled());
  const auto d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data() == x.data());
  auto y = et::sum(x * d.to(et::cpu) + x);
  y.backward();
  CHECK(x.grad().to_vector() == std::vector<float>{2, 2, 2});  // d is a constant 1
}

TEST_CASE("a second backward through a freed graph throws; retain_graph keeps it", "[autograd]") {
  auto x = et::ones<double>(et::cpu, {2});
  x.requires_grad_(true);
  auto y = et::sum(et::exp(x));
  y.backward(et::retain_graph);
  y.backward();
  CHECK(x.grad().to_vector()[0] == Approx(2 * std::exp(1.0)));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("a second time") && Catch::Contains("retain_graph"));
}

TEST_CASE("an in-place write to a saved tensor is detected at backward time", "[autograd]") {
  auto x = et::ones<double>(et::cpu, {2});
  x.requires_grad_(true);
  et::Tensor<double, 1> h = x * 2.0;  // recorded: h needs no gradient of its own...
  auto y = et::sum(h * h);            // ...but this node saved h
  h += 1.0;                           // an in-place write to h
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified in place") && Catch::Contains("version"));
}

TEST_CASE("each op family's backward notices a saved tensor written in place", "[autograd][version]") {
  SECTION("matmul and linear layers") { test::check_matmul_versions<Cpu>(); }
  SECTION("fused expressions and reductions") { test::check_fused_and_reduction_versions<Cpu>(); }
  SECTION("softmax, log_softmax, logsumexp") { test::check_softmax_versions<Cpu>(); }
  SECTION("conv2d, max_pool2d, cross_entropy") { test::check_nn_versions<Cpu>(); }
  SECTION("inputs that need no gradient, written through any handle") { test::check_untracked_versions<Cpu>(); }
  SECTION("sort's returned indices") { test::check_sort_versions<Cpu>(); }
  SECTION("tensors of no elements") { test::check_empty_versions<Cpu>(); }
}

namespace {

/// Runs f on a thread with a stack of `bytes`, small enough that freeing or differentiating
/// the test's graphs by one nested call per operation would overflow it; rethrows f's error.
template <class F>
void on_small_stack(std::size_t bytes, F f) {
  std::exception_ptr failure;
  auto body = [&] {
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
    }
  };
  using Body = decltype(body);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, bytes);
  pthread_t thread;
  auto start = [](void* p) -> void* {
    (*static_cast<Body*>(p))();
    return nullptr;
  };
  const int created = pthread_create(&thread, &attributes, start, &body);
  pthread_attr_destroy(&attributes);
  REQUIRE(created == 0);
  pthread_join(thread, nullptr);
  if (failure) std::rethrow_exception(failure);
}

/// A recorded operation with nothing to do.
struct EmptyNode final : et::detail::Node {
  std::string name() const override { return "empty node"; }
  void apply(bool) override {}
};

}  // namespace

TEST_CASE("a chain of a million recorded operations is freed without recursion", "[autograd][deep]") {
  auto head = std::make_shared<EmptyNode>();
  const std::weak_ptr<EmptyNode> first = head;
  for (int i = 1; i < 1'000'000; ++i) {
    auto node = std::make_shared<EmptyNode>();
    node->next.push_back(std::move(head));
    head = std::move(node);
  }
  head.reset();  // ~Node hands its inputs' nodes to one list instead of freeing them itself
  CHECK(first.expired());
}

TEST_CASE("deep chains of tensor operations are differentiated and freed on a small stack", "[autograd][deep]") {
  // 10^4 operations: one nested call each (some hundred bytes of stack) overflows 1 MiB.
  constexpr int depth = 10'000;
  std::vector<double> grads;
  on_small_stack(std::size_t(1) << 20, [&] {
    for (int kind = 0; kind < 4; ++kind) {
      auto x = et::ones<double>(et::cpu, {2});
      x.requires_grad_(true);
      et::Tensor<double, 1> root = x * 1.0, y = kind == 0 ? x : root;
      for (int i = 0; i < depth; ++i) {
        if (kind == 0) y = et::eval(y * 1.0);  // chained evaluations
        else if (kind == 1) y += 1.0;           // in-place writes into one result
        else y = y.slice(0, 0, 2);              // nested views
      }
      if (kind == 3) root += 1.0;  // every view's history is taken anew at the backward
      et::sum(y).backward();
      grads.push_back(x.grad().to_vector()[0]);
    }
  });
  CHECK(grads == std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("in-place operations on recorded tensors are recorded, reading the values they overwrite", "[autograd]") {
  test::check_in_place_writes<Cpu>();
}

TEST_CASE("writes into views are recorded; views made before a write see it", "[autograd]") {
  test::check_view_writes<Cpu>();
}

TEST_CASE("autograd misuse gives et:: errors", "[autograd]") {
  auto x = et::ones<float>(et::cpu, {2});
  CHECK_THROWS_WITH(et::sum(x).backward(), Catch::Contains("does not require grad"));
  x.requires_grad_(true);
  const et::Tensor<float, 1> y = x * 2.0f;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("pass the gradient"));
  CHECK_THROWS_WITH(y.backward(et::ones<float>(et::cpu, {3})), Catch::Contains("gradient has shape"));
  CHECK_THROWS_WITH(x += 1.0f, Catch::Contains("leaf tensor that requires grad"));
  {
    et::NoGradGuard guard;  // as an optimizer step
    x -= 0.5f;
  }
  CHECK(x.to_vector() == std::vector<float>{0.5f, 0.5f});
  auto r = et::ones<float>(et::cpu, {2});
  et::Tensor<float, 1> computed = r * x;
  CHECK_THROWS_WITH(computed.requires_grad_(true), Catch::Contains("detach"));
}

TEST_CASE("a long expression with shared subexpressions: a clear error, and the way around it", "[autograd]") {
  auto x = et::from_vector(et::cpu, test::random_values<double>(6, 91, 0.5, 1.0), {6});
  x.requires_grad_(true);
  auto e1 = x * 0.5 + x;
  auto e2 = e1 * e1 - x;  // every level uses the one below twice: a tree of 2^depth operations
  auto e3 = e2 * e2 + e1;
  auto e4 = e3 * 0.1 + e2 * e3;
  CHECK_THROWS_WITH(et::eval(e4), Catch::Contains("autograd records expressions of up to") &&
                                      Catch::Contains("et::eval"));
  CHECK_THROWS_WITH(et::sum(e4), Catch::Contains("autograd records expressions of up to"));
  // Evaluating a level into a tensor makes each part small; each is recorded.
  const et::Tensor<double, 1> t2 = e2;
  const et::Tensor<double, 1> t3 = t2 * t2 + e1;
  const et::Tensor<double, 1> z = t3 * 0.1 + t2 * t3;
  z.backward(et::ones<double>(et::cpu, {6}));
  const auto analytic = x.grad().to_vector();
  auto f = [](double v) {
    const double b = v * 0.5 + v, c = b * b - v, d = c * c + b;
    return d * 0.1 + c * d;
  };
  const auto values = x.detach().to_vector();
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double numeric = (f(values[i] + 1e-6) - f(values[i] - 1e-6)) / 2e-6;
    CHECK(analytic[i] == Approx(numeric).epsilon(1e-6));
  }
}

TEST_CASE("graphs recorded on several threads share a leaf; its gradients all arrive", "[autograd][threads]") {
  auto w = et::ones<double>(et::cpu, {8});
  w.requires_grad_(true);
  constexpr int threads = 4, rounds = 25;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&w, t] {
      for (int r = 0; r < rounds; ++r) et::sum(w * static_cast<double>(t + 1)).backward();
    });
  for (auto& worker : workers) worker.join();
  // Each thread t adds (t + 1) per round: rounds * (1 + 2 + 3 + 4).
  for (const double g : w.grad().to_vector()) CHECK(g == rounds * 10.0);
}
