// Mixed precision (et::amp), shared by the CPU and GPU tests (test_amp.cpp / .cu): GradScaler's
// skip, backoff and growth, step by step, against PyTorch's formulas (torch.amp.GradScaler:
// _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_) computed here on the host,
// for SGD (skipped on the device), SGD with momentum, two optimizers with one overflowing, and
// Adam (skipped on the host, its step not counted). Autocast's cases: autocast_cases.hpp.
#pragma once

#include "random_values.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace test {

/// PyTorch's scaler on the host: the scale, the growth tracker and the update rule.
struct HostScaler {
  double scale = 65536.0, growth = 2.0, backoff = 0.5;
  int interval = 2000, tracker = 0;
  void update(bool overflow) {
    if (overflow) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      scale *= growth;
      tracker = 0;
    }
  }
};

/// Gradient c (times the scale) of L = sum(c * w): the loss a step backpropagates.
template <class D>
et::Tensor<float, 0, D> linear_loss(const et::Tensor<float, 1, D>& w, const std::vector<float>& c) {
  const auto coefficients = et::from_vector(D{}, c, {std::int64_t(c.size())});
  return et::sum(coefficients * w);
}

/// Twelve steps of SGD (lr 0.5, with or without momentum 0.9) under a scaler with
/// growth_interval 3; steps 4, 8 (inf) and 9 (NaN) overflow. After every step: the
/// parameter, the scale and the growth tracker against HostScaler and PyTorch's SGD.
template <class D>
void check_scaler_with_sgd(double momentum) {
  const std::vector<float> w0{0.25f, -1.5f, 2.0f, 0.75f, -0.125f};
  auto w = et::from_vector(D{}, w0, {5});
  w.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 0.5, .momentum = momentum});
  et::amp::GradScaler<D> scaler(D{}, {.growth_interval = 3});
  HostScaler host{.interval = 3};
  double lowest = host.scale, highest = host.scale;
  std::vector<double> want(w0.begin(), w0.end()), buffer(w0.size(), 0.0);
  bool buffered = false;
  for (int step = 1; step <= 12; ++step) {
    CAPTURE(step);
    std::vector<float> c{0.5f, -1.0f, 0.25f, 2.0f, -0.75f};
    for (auto& v : c) v *= float(step % 3 + 1);
    const bool overflow = step == 4 || step == 8 || step == 9;
    if (step == 4) c[1] = 1e36f;  // times the scale: inf in float
    if (step == 8) c[2] = std::numeric_limits<float>::infinity();
    if (step == 9) c[3] = std::numeric_limits<float>::quiet_NaN();
    opt.zero_grad(true);
    scaler.scale(linear_loss(w, c)).backward();
    scaler.step(opt);
    scaler.update();
    if (!overflow) {  // PyTorch's SGD on the unscaled gradient c (exact: the scales are powers of 2)
      for (std::size_t i = 0; i < want.size(); ++i) {
        double g = c[i];
        if (momentum != 0) {
          buffer[i] = buffered ? momentum * buffer[i] + g : g;
          g = buffer[i];
        }
        want[i] = double(float(want[i]) - float(0.5 * g));
      }
      buffered = true;
    }
    host.update(overflow);
    lowest = std::min(lowest, host.scale), highest = std::max(highest, host.scale);
    const auto got = w.detach().to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(double(got[i]) == Approx(want[i]).epsilon(1e-6).margin(1e-6));
    CHECK(scaler.get_scale() == host.scale);
    CHECK(scaler.growth_tracker() == host.tracker);
  }
  CHECK(lowest == 32768.0);  // the sequence both shrank and grew the scale
  CHECK(highest == 131072.0);
}

/// Two SGDs under one scaler: an overflow in the second's gradient skips the second only,
/// and the scale backs off once (PyTorch's per-optimizer found_inf).
template <class D>
void check_scaler_with_two_optimizers() {
  auto a = et::from_vector(D{}, std::vector<float>{1.0f, 2.0f}, {2});
  auto b = et::from_vector(D{}, std::vector<float>{3.0f, 4.0f}, {2});
  a.requires_grad_(true), b.requires_grad_(true);
  et::optim::SGD first(et::optim::parameters(a), {.lr = 0.25}), second(et::optim::parameters(b), {.lr = 0.25});
  et::amp::GradScaler<D> scaler(D{});
  const auto loss = linear_loss(a, {1.0f, -2.0f}) + linear_loss(b, {std::numeric_limits<float>::infinity(), 1.0f});
  scaler.scale(et::Tensor<float, 0, D>(loss)).backward();
  scaler.unscale_(first);
  CHECK_THROWS_WITH(scaler.unscale_(first), Catch::Contains("et: GradScaler::unscale_() was already called"));
  scaler.step(first);
  scaler.step(second);
  CHECK_THROWS_WITH(scaler.step(second), Catch::Contains("et: GradScaler::step() was already called"));
  scaler.update();
  CHECK(a.detach().to_vector() == std::vector<float>{0.75f, 2.5f});
  CHECK(b.detach().to_vector() == std::vector<float>{3.0f, 4.0f});
  CHECK(scaler.get_scale() == 32768.0);
}

/// Adam under a scaler: an overflowing step is skipped on the host and not counted, so the
/// bias corrections of the later steps are those of PyTorch's (which never ran it).
template <class D>
void check_scaler_with_adam() {
  auto w = et::from_vector(D{}, std::vector<float>{0.5f, -0.5f}, {2});
  auto reference = et::from_vector(D{}, std::vector<float>{0.5f, -0.5f}, {2});
  w.requires_grad_(true), reference.requires_grad_(true);
  et::optim::Adam opt(et::optim::parameters(w), {.lr = 0.1}), plain(et::optim::parameters(reference), {.lr = 0.1});
  et::amp::GradScaler<D> scaler(D{});
  for (int step = 1; step <= 4; ++step) {
    const bool overflow = step == 2;
    const std::vector<float> c{overflow ? std::numeric_limits<float>::infinity() : 1.0f, -0.5f * float(step)};
    opt.zero_grad(true);
    scaler.scale(linear_loss(w, c)).backward();
    scaler.step(opt);
    scaler.update();
    if (!overflow) {
      plain.zero_grad(true);
      linear_loss(reference, c).backward();
      plain.step();
    }
  }
  const auto got = w.detach().to_vector(), want = reference.detach().to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6));
  CHECK(scaler.get_scale() == 32768.0);
}

/// A disabled scaler passes everything through; bad options and uses throw et::Error.
template <class D>
void check_scaler_errors() {
  auto w = et::from_vector(D{}, std::vector<float>{1.0f}, {1});
  w.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 1.0});
  et::amp::GradScaler<D> off(D{}, {.enabled = false});
  const auto loss = linear_loss(w, {2.0f});
  CHECK(off.scale(loss).item() == 2.0f * 1.0f);
  off.scale(loss).backward();
  off.step(opt);
  off.update();
  CHECK(w.detach().to_vector() == std::vector<float>{-1.0f});
  CHECK(off.get_scale() == 1.0);
  CHECK_THROWS_WITH(et::amp::GradScaler<D>(D{}, {.backoff_factor = 1.5}), Catch::Contains("et: GradScaler needs"));
  et::amp::GradScaler<D> scaler(D{});
  CHECK_THROWS_WITH(scaler.update(-1.0), Catch::Contains("new_scale > 0"));
  scaler.update(1024.0);
  CHECK(scaler.get_scale() == 1024.0);
  CHECK(scaler.scale(loss).item() == 2048.0f);
  et::optim::SGD dampened(et::optim::parameters(w), {.lr = 1.0, .momentum = 0.9, .dampening = 0.1});
  CHECK_THROWS_WITH(scaler.step(dampened), Catch::Contains("dampening"));
  et::optim::SGD overlapped(et::optim::parameters(w), {.lr = 1.0});
  overlapped.overlap_with_backward();
  CHECK_THROWS_WITH(scaler.step(overlapped), Catch::Contains("overlap_with_backward"));
  // step() unscales too, so unscale_() after it is "after step()", not "already called"
  et::optim::SGD plain(et::optim::parameters(w), {.lr = 1.0});
  scaler.scale(linear_loss(w, {1.0f})).backward();
  scaler.step(plain);
  CHECK_THROWS_WITH(scaler.unscale_(plain), Catch::Contains("et: GradScaler::unscale_() after step()"));
}

}  // namespace test
