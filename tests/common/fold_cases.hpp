// The optimizer step folded into the backward (optim/optimizer.hpp, derivatives/linalg.hpp),
// shared by the CPU and GPU tests (test_optim.cpp / .cu): the scaled GEMM it runs against a
// double-precision product, and which weights take the fold, in double precision against
// the same training with step() after the backward.
#pragma once

#include "gradcheck.hpp"
#include "matmul_reference.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

namespace test {

/// out = alpha * a @ b + beta * out (et::detail::run_gemm with a GemmScale) for row- and
/// column-major results, beta 0 (out not read: it holds NaN), 1 and other, and k = 0.
template <class D, class T>
void check_scaled_gemm() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{37}})
    for (const bool transposed : {false, true})
      for (const auto [alpha, beta] : {std::array{1.0, 0.0}, std::array{-0.25, 0.0}, std::array{1.0, 1.0},
                                       std::array{-0.5, 0.75}}) {
        const std::int64_t m = 9, n = 5;
        const auto a = et::from_vector(D{}, uniform<T>(std::size_t(m * k), 1), {m, k});
        const auto b = et::from_vector(D{}, uniform<T>(std::size_t(k * n), 2), {k, n});
        std::vector<T> c0 = uniform<T>(std::size_t(m * n), 3);
        if (beta == 0) c0.assign(c0.size(), T(nan));
        auto out = transposed ? et::from_vector(D{}, c0, {n, m}).transpose(0, 1) : et::from_vector(D{}, c0, {m, n});
        const HostMatrices c_host = host_matrices(out);
        const Product product = reference_product(host_matrices(a), host_matrices(b));
        Product want = product;
        for (std::size_t e = 0; e < want.value.size(); ++e) {
          const double c = beta == 0 ? 0.0 : c_host.values[e];
          want.value[e] = alpha * product.value[e] + beta * c;
          want.scale[e] = std::fabs(alpha) * product.scale[e] + std::fabs(beta * c);
        }
        CAPTURE(k, transposed, alpha, beta);
        et::detail::run_gemm(a, b, out, et::MathMode::exact, et::detail::GemmEpilogue::none, {},
                             et::detail::GemmScale{alpha, beta});
        check_product(out.to_vector(), want, product_tolerance<T>());
      }
}

/// Trains `loss(params)` for `steps` steps with SGD (lr 0.1, weight decay 0.01) or `make`,
/// overlapped with the backward or not; returns the parameters' values, and through
/// `defined` whether each had a gradient after the last backward (before its step).
template <class D, class Make>
std::vector<double> train_folded(std::vector<et::Tensor<double, 2, D>> params, const auto& loss, Make make,
                                 bool overlap, int steps, std::vector<char>* defined = nullptr) {
  for (auto& p : params) p = p.clone().detach().requires_grad_(true);
  std::vector<et::optim::Parameter<double, D>> list(params.begin(), params.end());
  auto opt = make(list);
  if (overlap) opt.overlap_with_backward();
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad(true);
    loss(params).backward();
    if (defined) {
      defined->clear();
      for (const auto& p : params) defined->push_back(p.grad().defined());
    }
    opt.step();
  }
  std::vector<double> values;
  for (const auto& p : params)
    for (const double v : p.detach().to_vector()) values.push_back(v);
  return values;
}

/// SGD without momentum, overlapped with the backward, updates a weight inside the GEMM
/// that computes its gradient (it then has no grad()), wherever it is read once and whole
/// as either operand; every other case keeps the gradient and updates on the side stream.
/// Either way the parameters end where step() after the backward leaves them.
template <class D>
void check_folded_steps() {
  using Params = std::vector<et::Tensor<double, 2, D>>;
  using List = std::vector<et::optim::Parameter<double, D>>;
  const auto x = et::randn<double>(D{}, {5, 4}, 1);
  const auto target = et::randn<double>(D{}, {5, 3}, 2);
  const Params weights{et::randn<double>(D{}, {3, 4}, 3), et::randn<double>(D{}, {3, 3}, 4)};
  auto sgd = [](List p) { return et::optim::SGD(p, {.lr = 0.1, .weight_decay = 0.01}); };

  struct Case {
    const char* what;
    std::function<et::Tensor<double, 0, D>(const Params&)> loss;
    std::vector<char> folded;  // per parameter
  };
  using M = et::Tensor<double, 2, D>;
  const auto sq = [](const M& e) { return et::Tensor<double, 0, D>(et::sum(e * e)); };
  const std::vector<Case> cases{
      {"a Linear's weight (the right operand, transposed) and a left operand",
       [&](const Params& p) {
         const M hidden = et::sigmoid(et::matmul(x, p[0].transpose(0, 1)));
         return sq(et::matmul(p[1], hidden.transpose(0, 1)));
       },
       {1, 1}},
      {"a weight read twice (tied): not folded",
       [&](const Params& p) {
         return sq(et::matmul(x, p[0].transpose(0, 1)) - target) + sq(et::matmul(x * 2.0, p[0].transpose(0, 1))) +
                sq(et::matmul(p[1], p[1]));
       },
       {0, 0}},
      {"a weight read through a copy or in part: not folded",
       [&](const Params& p) {
         return sq(et::matmul(x, p[0].clone().transpose(0, 1))) + sq(et::matmul(x.slice(1, 0, 2), p[1].slice(0, 0, 2)));
       },
       {0, 0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::vector<char> plain_defined, defined;
    const auto plain = train_folded<D>(weights, c.loss, sgd, false, 3, &plain_defined);
    const auto overlapped = train_folded<D>(weights, c.loss, sgd, true, 3, &defined);
    CHECK(plain_defined == std::vector<char>(weights.size(), 1));
    for (std::size_t k = 0; k != defined.size(); ++k) CHECK(bool(defined[k]) == !c.folded[k]);
    REQUIRE(overlapped.size() == plain.size());
    for (std::size_t i = 0; i != plain.size(); ++i) CHECK(overlapped[i] == Approx(plain[i]).epsilon(1e-12));
    CHECK(plain != train_folded<D>(weights, c.loss, sgd, false, 0));  // the steps moved them
  }

  // Optimizers whose step is not linear in the gradient keep it; a backward that starts
  // from a gradient (zero_grad() in place) adds into it. Both update exactly as step().
  const auto& linear = cases[0].loss;
  std::vector<char> defined;
  auto momentum = [](List p) { return et::optim::SGD(p, {.lr = 0.1, .momentum = 0.9}); };
  auto adam = [](List p) { return et::optim::Adam(p, {.lr = 0.01}); };
  CHECK(train_folded<D>(weights, linear, momentum, true, 3, &defined) ==
        train_folded<D>(weights, linear, momentum, false, 3));
  CHECK(defined == std::vector<char>{1, 1});
  CHECK(train_folded<D>(weights, linear, adam, true, 3, &defined) == train_folded<D>(weights, linear, adam, false, 3));
  CHECK(defined == std::vector<char>{1, 1});

  auto w = weights[0].clone().detach().requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 0.1});
  opt.overlap_with_backward();
  auto loss = [&] { return sq(et::matmul(x, w.transpose(0, 1))); };
  loss().backward();  // folded
  CHECK_FALSE(w.grad().defined());
  opt.step();
  opt.zero_grad();  // no gradient to zero: the next backward folds again
  loss().backward();
  CHECK_FALSE(w.grad().defined());
  opt.step();
  et::sum(w * 0.0).backward();  // an elementwise backward: a gradient (zeros), updated on the side stream
  opt.step();
  opt.zero_grad();  // zeroed in place: the next backward adds into it, then updates
  loss().backward();
  CHECK(w.grad().defined());
  opt.step();
  CHECK_THROWS_WITH(et::optim::SGD(et::optim::parameters(w), {.lr = 0.1}).overlap_with_backward(),
                    Catch::Contains("already folded"));

  // A hook of another owner (DistributedDataParallel's) waits for the gradient: not folded.
  auto v = weights[0].clone().detach().requires_grad_(true);
  const auto other = std::make_shared<int>(0);
  int calls = 0;
  et::optim::Parameter<double, D>(v).add_grad_hook({other, [&calls] { ++calls; }});
  et::optim::SGD with_hook(et::optim::parameters(v), {.lr = 0.1});
  with_hook.overlap_with_backward();
  sq(et::matmul(x, v.transpose(0, 1))).backward();
  CHECK(v.grad().defined());
  CHECK(calls == 1);
  with_hook.step();
}

}  // namespace test
