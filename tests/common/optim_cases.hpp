// Optimizers (et::optim::SGD, Adam, AdamW), shared by the CPU and GPU tests (test_optim.cpp
// / .cu): three steps on two parameters against PyTorch's update formulas computed here
// on the host in double precision, with gradients 2 c p from L = sum(c p^2).
#pragma once

#include "gradcheck.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace test {

/// PyTorch's update rules, one element at a time (the reference).
struct HostOptimizer {
  std::string kind;  // "sgd", "adam", "adamw"
  double lr, momentum = 0, dampening = 0, weight_decay = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  std::vector<double> buf{}, m{}, v{};
  int t = 0;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    ++t;
    buf.resize(p.size()), m.resize(p.size()), v.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (kind == "sgd") {
        g += weight_decay * p[i];
        if (momentum != 0) {
          buf[i] = t == 1 ? g : momentum * buf[i] + (1 - dampening) * g;
          g = nesterov ? g + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * g;
      } else {
        if (kind == "adamw") p[i] *= 1 - lr * weight_decay;
        else g += weight_decay * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        const double bias1 = 1 - std::pow(b1, t), bias2 = 1 - std::pow(b2, t);
        p[i] -= lr / bias1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bias2) + eps);
      }
    }
  }
};

/// Three steps of `make(parameters)` on w [3, 4] and b [5] against `reference`.
template <class D, class Make>
void check_steps(const std::string& what, Make make, HostOptimizer reference) {
  auto w_host = random_values<double>(12, 31, -1, 1), b_host = random_values<double>(5, 32, -1, 1);
  const auto cw_host = random_values<double>(12, 33, 0.5, 2), cb_host = random_values<double>(5, 34, 0.5, 2);
  auto w = et::from_vector(D{}, w_host, {3, 4});
  auto b = et::from_vector(D{}, b_host, {5});
  w.requires_grad_(true), b.requires_grad_(true);
  const auto cw = et::from_vector(D{}, cw_host, {3, 4});
  const auto cb = et::from_vector(D{}, cb_host, {5});
  auto opt = make(et::optim::parameters(w, b));
  HostOptimizer reference_b = reference;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    et::Tensor<double, 0, D> loss = et::sum(cw * w * w) + et::sum(cb * b * b);
    loss.backward();
    opt.step();
    std::vector<double> gw(12), gb(5);
    for (std::size_t i = 0; i < 12; ++i) gw[i] = 2 * cw_host[i] * w_host[i];
    for (std::size_t i = 0; i < 5; ++i) gb[i] = 2 * cb_host[i] * b_host[i];
    reference.step(w_host, gw);
    reference_b.step(b_host, gb);
  }
  const auto w_got = w.detach().to_vector(), b_got = b.detach().to_vector();
  CAPTURE(what);
  for (std::size_t i = 0; i < 12; ++i) CHECK(w_got[i] == Approx(w_host[i]).epsilon(1e-12).margin(1e-14));
  for (std::size_t i = 0; i < 5; ++i) CHECK(b_got[i] == Approx(b_host[i]).epsilon(1e-12).margin(1e-14));
}

template <class D>
void check_optimizers() {
  using P = std::vector<et::optim::Parameter<double, D>>;
  check_steps<D>("sgd", [](P p) { return et::optim::SGD(p, {.lr = 0.1}); }, {.kind = "sgd", .lr = 0.1});
  check_steps<D>(
      "sgd momentum, dampening, weight decay",
      [](P p) { return et::optim::SGD(p, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}); },
      {.kind = "sgd", .lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  check_steps<D>(
      "sgd nesterov", [](P p) { return et::optim::SGD(p, {.lr = 0.05, .momentum = 0.8, .nesterov = true}); },
      {.kind = "sgd", .lr = 0.05, .momentum = 0.8, .nesterov = true});
  check_steps<D>(
      "adam", [](P p) { return et::optim::Adam(p, {.lr = 0.01, .weight_decay = 0.1}); },
      {.kind = "adam", .lr = 0.01, .weight_decay = 0.1});
  check_steps<D>(
      "adamw", [](P p) { return et::optim::AdamW(p, {.lr = 0.01, .betas = {0.8, 0.99}}); },
      {.kind = "adamw", .lr = 0.01, .weight_decay = 0.01, .b1 = 0.8, .b2 = 0.99});

  // More parameters than one launch takes (256), and one without a gradient: skipped.
  std::vector<et::Tensor<double, 1, D>> many;
  std::vector<et::optim::Parameter<double, D>> params;
  for (int k = 0; k < 300; ++k) {
    many.push_back(et::full<double>(D{}, {1 + k % 3}, double(k)));
    many.back().requires_grad_(true);
    params.emplace_back(many.back());
  }
  et::optim::SGD sgd(params, {.lr = 0.5});
  et::Tensor<double, 0, D> loss = et::sum(many[0]);
  for (int k = 1; k < 299; ++k) loss = loss + et::sum(many[static_cast<std::size_t>(k)]);  // many[299]: no gradient
  loss.backward();
  sgd.step();
  for (int k = 0; k < 300; ++k) {
    const auto values = many[static_cast<std::size_t>(k)].detach().to_vector();
    CHECK(values[0] == (k < 299 ? k - 0.5 : k));
  }
  sgd.zero_grad();
  CHECK(et::sum(many[0].grad()).item() == 0.0);
  const auto kept = many[1].grad();  // zero_grad() zeroed it in place
  sgd.zero_grad(/*set_to_none=*/true);
  CHECK_FALSE(many[0].grad().defined());
  CHECK(kept.defined());
  et::sum(many[0] * 3.0).backward();  // written anew, not added into zeros
  CHECK(many[0].grad().to_vector() == std::vector<double>{3.0});
  CHECK_FALSE(many[1].grad().defined());
  sgd.step();  // parameters without a gradient are skipped
  CHECK(many[0].detach().to_vector()[0] == -2.0);  // -0.5 - 0.5 * 3
  CHECK(many[1].detach().to_vector()[0] == 0.5);

  // Errors.
  auto leaf = et::ones<double>(D{}, {2, 3});
  CHECK_THROWS_WITH(et::optim::parameters(leaf), Catch::Contains("requires grad"));
  leaf.requires_grad_(true);
  CHECK_THROWS_WITH(et::optim::parameters(leaf.transpose(0, 1)), Catch::Contains("contiguous"));
  const et::Tensor<double, 2, D> computed = leaf * 2.0;
  CHECK_THROWS_WITH(et::optim::parameters(computed), Catch::Contains("leaf"));
  CHECK_THROWS_WITH(et::optim::SGD(et::optim::parameters(leaf), {.lr = 0.1, .nesterov = true}),
                    Catch::Contains("nesterov"));
  CHECK_THROWS_WITH(et::optim::Adam(et::optim::parameters(leaf), {.betas = {1.0, 0.9}}), Catch::Contains("betas"));
}

/// AdamW's parameter groups (GPT-2's: weight decay on the matrices only, here also a
/// group's own learning rate) and the capturable form (step counts on the device), three
/// steps against the host's rules per parameter; in the third form b's gradient is absent
/// at the second step, so b counts two steps (its own bias corrections), w three.
template <class D>
void check_adam_groups() {
  for (const int form : {0, 1, 2}) {
    const bool capturable = form != 0, skip_b = form == 2;
    CAPTURE(capturable, skip_b);
    auto w_host = random_values<double>(12, 41, -1, 1), b_host = random_values<double>(5, 42, -1, 1);
    auto w = et::from_vector(D{}, w_host, {3, 4});
    auto b = et::from_vector(D{}, b_host, {5});
    w.requires_grad_(true), b.requires_grad_(true);
    et::optim::AdamW<double, D> opt({{.params = et::optim::parameters(w), .lr = 0.02, .weight_decay = 0.1},
                                     {.params = et::optim::parameters(b), .weight_decay = 0.0}},
                                    {.lr = 0.01, .betas = {0.8, 0.95}, .capturable = capturable});
    CHECK(opt.groups() == 2);
    HostOptimizer rw{.kind = "adamw", .lr = 0.02, .weight_decay = 0.1, .b1 = 0.8, .b2 = 0.95};
    HostOptimizer rb{.kind = "adamw", .lr = 0.01, .weight_decay = 0.0, .b1 = 0.8, .b2 = 0.95};
    for (int step = 0; step < 3; ++step) {
      const bool with_b = !(skip_b && step == 1);
      opt.zero_grad(true);
      et::Tensor<double, 0, D> loss = et::sum(w * w * w);
      if (with_b) loss = loss + et::sum(b * b);
      loss.backward();
      opt.step();
      std::vector<double> gw(12), gb(5);
      for (std::size_t i = 0; i < 12; ++i) gw[i] = 3 * w_host[i] * w_host[i];
      for (std::size_t i = 0; i < 5; ++i) gb[i] = 2 * b_host[i];
      rw.step(w_host, gw);
      if (with_b) rb.step(b_host, gb);
    }
    CHECK(opt.step_count(0) == 3);
    CHECK(opt.step_count(1) == (skip_b ? 2 : 3));
    const auto w_got = w.detach().to_vector(), b_got = b.detach().to_vector();
    for (std::size_t i = 0; i < 12; ++i) CHECK(w_got[i] == Approx(w_host[i]).epsilon(1e-12).margin(1e-14));
    for (std::size_t i = 0; i < 5; ++i) CHECK(b_got[i] == Approx(b_host[i]).epsilon(1e-12).margin(1e-14));
  }
  auto leaf = et::ones<double>(D{}, {2});
  leaf.requires_grad_(true);
  CHECK_THROWS_WITH((et::optim::AdamW<double, D>({{.params = et::optim::parameters(leaf)},
                                                  {.params = et::optim::parameters(leaf), .lr = -1.0}},
                                                 {})),
                    Catch::Contains("parameter group 1"));
}

/// overlap_with_backward(): updates launched during the backward, as each gradient is
/// complete, leave every parameter exactly as step() after the backward does (the same
/// update, element by element; SGD's folded into the GEMMs to rounding), for each optimizer; over a model (Linear, sigmoid) and over
/// loose tensors where one step's backward does not reach a parameter that has a gradient.
template <class D>
void check_overlapped_steps() {
  using P = std::vector<et::optim::Parameter<float, D>>;
  auto model = [] {
    using Linear = et::nn::Linear<float, D>;
    return et::nn::Sequential(Linear(D{}, 7, 6, 11), et::nn::Sigmoid{}, Linear(D{}, 6, 3, 12));
  };
  const auto x = et::randn<float>(D{}, {5, 7}, 13);
  const auto target = et::randn<float>(D{}, {5, 3}, 14);
  auto train = [&](auto make, bool overlap, int steps) {
    auto m = model();
    auto opt = make(m.parameters());
    if (overlap) CHECK(opt.overlap_with_backward().overlaps_backward());
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad(step == 1);  // zeroed in place, then dropped
      et::nn::mse_loss(m(x), target).backward();
      opt.step();
    }
    std::vector<float> values;
    for (const auto& p : m.parameters()) {
      const auto v = p.data().to_vector();
      values.insert(values.end(), v.begin(), v.end());
    }
    return values;
  };
  auto same = [&](const char* what, auto make, bool folded = false) {
    CAPTURE(what);
    const auto plain = train(make, false, 3);
    const auto overlapped = train(make, true, 3);
    if (!folded) CHECK(overlapped == plain);
    REQUIRE(overlapped.size() == plain.size());
    // Folded into the weight-gradient GEMMs (fold_cases.hpp), SGD's update rounds once less.
    for (std::size_t i = 0; i != plain.size(); ++i) CHECK(overlapped[i] == Approx(plain[i]).epsilon(1e-5));
    CHECK(plain != train(make, false, 0));  // the steps moved the parameters
  };
  same("sgd", [](P p) { return et::optim::SGD(p, {.lr = 0.1}); }, true);
  same("sgd nesterov, weight decay",
       [](P p) { return et::optim::SGD(p, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}); });
  same("adam", [](P p) { return et::optim::Adam(p, {.lr = 0.01, .weight_decay = 0.1}); });
  same("adamw", [](P p) { return et::optim::AdamW(p, {.lr = 0.01}); });

  // Loose tensors; the second step's backward does not reach c, whose zeroed gradient
  // step() still applies (weight decay moves it), on the current stream.
  auto run = [](bool overlap, bool moved) {
    auto w = et::full<float>(D{}, {4}, 1.5f), c = et::full<float>(D{}, {3}, -2.0f);
    w.requires_grad_(true), c.requires_grad_(true);
    et::optim::SGD first(et::optim::parameters(w, c), {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.2});
    if (overlap && moved) first.overlap_with_backward();
    auto opt = moved ? std::move(first) : first;  // a moved optimizer takes its hooks along
    if (overlap && !moved) opt.overlap_with_backward();  // a copy overlaps once asked
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      et::Tensor<float, 0, D> loss = et::sum(w * w);
      if (step != 1) loss = loss + et::sum(c * c * c);
      loss.backward();
      opt.step();
    }
    auto values = w.detach().to_vector();
    for (const float v : c.detach().to_vector()) values.push_back(v);
    return values;
  };
  const auto plain = run(false, false);
  CHECK(run(true, false) == plain);
  CHECK(run(true, true) == plain);
  CHECK(plain[4] != -2.0f);

  // A second backward before step() is an error; without the optimizer, backward is as before.
  auto w = et::full<float>(D{}, {2}, 1.0f);
  w.requires_grad_(true);
  {
    et::optim::SGD opt(et::optim::parameters(w), {.lr = 0.5});
    opt.overlap_with_backward();
    et::sum(w * w).backward();
    et::synchronize(D{});  // the device: the update ran on a side stream
    CHECK(w.detach().to_vector() == std::vector<float>{0.0f, 0.0f});  // updated during the backward
    CHECK_THROWS_WITH(et::sum(w * w).backward(), Catch::Contains("call step() after each backward"));
    opt.step();
    CHECK(w.detach().to_vector() == std::vector<float>{0.0f, 0.0f});  // 1 - 0.5 * 2, once
  }
  w.zero_grad();
  et::sum(w * 3.0f).backward();  // the optimizer is gone: its hook is dropped
  CHECK(w.grad().to_vector() == std::vector<float>{3.0f, 3.0f});
  CHECK(w.detach().to_vector() == std::vector<float>{0.0f, 0.0f});
}

/// Parameters with gradients c_k (from L_k = sum(c_k * w_k), one backward each), for
/// nn::clip_grad_norm_: `sizes` elements each; a size of -1 is a parameter without a gradient.
template <class T, class D>
struct ClipSetup {
  std::vector<et::Tensor<T, 1, D>> weights;
  std::vector<std::vector<double>> grads;  // empty for the one without a gradient
  ClipSetup(const std::vector<std::int64_t>& sizes, std::uint64_t seed) {
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      auto w = et::zeros<T>(D{}, {std::max<std::int64_t>(sizes[k], 1)});
      w.requires_grad_(true);
      weights.push_back(w);
      grads.emplace_back();
      if (sizes[k] < 0) continue;
      const auto c = random_values<T>(static_cast<std::size_t>(sizes[k]), seed + k, -2.0, 2.0);
      grads.back().assign(c.begin(), c.end());
      et::sum(w * et::from_vector(D{}, c, {sizes[k]})).backward();
    }
  }
  std::vector<et::optim::Parameter<T, D>> parameters() const { return {weights.begin(), weights.end()}; }
  double norm(double p) const {
    double total = 0;
    for (const auto& g : grads)
      for (const double x : g) total = std::isinf(p) ? std::max(total, std::abs(x)) : total + std::pow(std::abs(x), p);
    return std::isinf(p) ? total : std::pow(total, 1 / p);
  }
};

/// nn::clip_grad_norm_ against the norm of all the gradients together, in double precision:
/// p = 2, 1, 3 and infinity, clipping and not; gradients spanning several blocks, a
/// parameter without a gradient, more parameters than one launch takes; NaN; bad arguments.
template <class D>
void check_clip_grad_norm() {
  const std::vector<std::int64_t> sizes = {5, 10000, -1, 1, 4097};
  for (const double p : {2.0, 1.0, 3.0, double(INFINITY)}) {
    for (const double max_norm : {1e9, 0.5}) {
      CAPTURE(p, max_norm);
      const ClipSetup<double, D> setup(sizes, 3);
      const double expected = setup.norm(p);
      const double norm = et::nn::clip_grad_norm_(setup.parameters(), max_norm, p);
      CHECK(norm == Approx(expected).epsilon(1e-12));
      const double factor = std::min(1.0, max_norm / (expected + 1e-6));
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        CAPTURE(k);
        if (setup.grads[k].empty()) {
          CHECK(!setup.weights[k].grad().defined());
          continue;
        }
        std::vector<double> clipped = setup.grads[k];
        for (double& g : clipped) g *= factor;
        check_all_close(setup.weights[k].grad().to_vector(), clipped, 1e-12);
      }
    }
  }
  // float gradients, 300 parameters: two launches of the norm, in order.
  const ClipSetup<float, D> many(std::vector<std::int64_t>(300, 33), 11);
  const auto norm = et::nn::clip_grad_norm_(many.parameters(), 1.0);
  CHECK(double(norm) == Approx(many.norm(2)).epsilon(1e-6));
  const double factor = 1.0 / (many.norm(2) + 1e-6);
  CHECK(double(many.weights[299].grad().to_vector()[32]) == Approx(many.grads[299][32] * factor).epsilon(1e-6));
  // No gradients: norm 0, nothing changes. A NaN gradient: NaN norm and gradients, as PyTorch.
  const ClipSetup<double, D> none({-1, -1}, 1);
  CHECK(double(et::nn::clip_grad_norm_(none.parameters(), 1.0)) == 0.0);
  ClipSetup<double, D> nan({3, 2}, 5);
  nan.weights[1].grad().detach() += NAN;
  CHECK(std::isnan(double(et::nn::clip_grad_norm_(nan.parameters(), 1.0))));
  CHECK(std::isnan(nan.weights[0].grad().to_vector()[0]));
  CHECK_THROWS_AS(et::nn::clip_grad_norm_(nan.parameters(), -1.0), et::Error);
  CHECK_THROWS_AS(et::nn::clip_grad_norm_(nan.parameters(), 1.0, 0.0), et::Error);
}

}  // namespace test
