// Losses on the GPU: the cases of tests/common/loss_cases.hpp on CUDA; cross_entropy's
// forward and backward as ONE kernel each (CUPTI-counted); the forward's last-block mean
// over many blocks, whole-block rows, repeated calls, two streams and a CUDA graph.
#include "../common/loss_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: losses: values, gradients and errors", "[nn][loss]") { test::check_losses<Gpu>(); }

TEST_CASE("GPU: cross_entropy's forward is one kernel, its backward one", "[nn][loss][cupti]") {
  auto logits = et::randn<float>(et::cuda<0>, {256, 1000}, 7);
  logits.requires_grad_(true);
  const auto labels = et::cast<std::int64_t>(et::rand<float>(et::cuda<0>, {256}, 8) * 999.0f);
  const et::Tensor<std::int64_t, 1, Gpu> label_tensor(labels);
  (void)et::nn::cross_entropy(logits.detach(), label_tensor);  // the stream's counter exists from here on
  test::LaunchCounter forward;
  const auto loss = et::nn::cross_entropy(logits, label_tensor);
  const test::Launches seen = forward.stop();
  CHECK(seen.kernels() == 1);  // logsumexp, the label's logit and the mean
  CHECK(seen.memsets == 0);    // the counter is left at 0, not zeroed a call
  const auto seed = et::ones<float>(et::cuda<0>, std::array<std::int64_t, 0>{});  // made outside the count
  test::LaunchCounter counter;
  loss.backward(seed);
  CHECK(counter.stop().kernels() == 1);
  // Each row of the gradient is (softmax - onehot) / N: it sums to 0.
  const auto row_sums = et::sum(logits.grad(), 1).to_vector();
  for (const float s : row_sums) CHECK(std::abs(s) < 1e-6f);
}

namespace {

/// The loss of float logits and labels on the host, in long double (loss_cases.hpp).
double host_cross_entropy(const et::Tensor<float, 2, Gpu>& x, const std::vector<std::int64_t>& labels) {
  const std::vector<float> values = et::Tensor<float, 2, Gpu>(x.contiguous()).to_vector();
  return test::cross_entropy_reference(std::vector<double>(values.begin(), values.end()), labels, x.size(1));
}

std::vector<std::int64_t> some_labels(std::int64_t rows, std::int64_t classes) {
  std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = (r * 2654435761LL) % classes;
  return labels;
}

}  // namespace

// The shapes take each path of the kernel: rows by warps, many blocks (the last block adds
// more partials than it has threads), rows of 3 (no vectors) and of 1000 (vectors), rows
// by whole blocks (few rows, longer than a warp reads at once), one row.
TEST_CASE("GPU: cross_entropy's one-kernel forward against the host, over blocks and streams", "[nn][loss]") {
  for (const auto& [rows, classes] : {std::pair<std::int64_t, std::int64_t>{70001, 3}, {4097, 1000}, {3, 20000},
                                      {200, 5000}, {1, 1}, {9, 4}}) {
    CAPTURE(rows, classes);
    auto x = et::randn<float>(et::cuda<0>, {rows, classes}, 11 + std::uint64_t(rows));
    x.requires_grad_(true);
    const std::vector<std::int64_t> labels = some_labels(rows, classes);
    const auto y = et::from_vector(et::cuda<0>, labels, {rows});
    const auto loss = et::nn::cross_entropy(x, y);
    const double want = host_cross_entropy(x.detach(), labels);
    CHECK(double(loss.item()) == Approx(want).epsilon(5e-6));
    // The backward reads the forward's lse: each row of softmax - onehot sums to 0.
    loss.backward();
    const std::vector<float> row_sums = et::sum(x.grad(), 1).to_vector();
    CHECK(*std::max_element(row_sums.begin(), row_sums.end(), [](float a, float b) {
      return std::abs(a) < std::abs(b);
    }) == Approx(0.0f).margin(2e-5f / static_cast<float>(rows)));
  }
  // Half logits: rows and the mean in float, the loss rounded once.
  const auto h = et::Tensor<et::half, 2, Gpu>(et::cast<et::half>(et::randn<float>(et::cuda<0>, {300, 50}, 9)));
  const std::vector<std::int64_t> h_labels = some_labels(300, 50);
  const double h_want = host_cross_entropy(et::Tensor<float, 2, Gpu>(et::cast<float>(h)), h_labels);
  CHECK(double(float(et::nn::cross_entropy(h, et::from_vector(et::cuda<0>, h_labels, {300})).item())) ==
        Approx(h_want).epsilon(1e-3));
  // Calls in a row: each finds its counter at 0 (a loss differing each time, so that a result
  // left in reused memory would show), and the same logits give the same bits.
  const auto x = et::randn<float>(et::cuda<0>, {5000, 37}, 3);
  const std::vector<std::int64_t> labels = some_labels(5000, 37);
  const auto y = et::from_vector(et::cuda<0>, labels, {5000});
  const float first = et::nn::cross_entropy(x, y).item();
  for (const float scale : {2.0f, 3.0f, 0.5f}) {
    const et::Tensor<float, 2, Gpu> scaled = x * scale;
    CHECK(double(et::nn::cross_entropy(scaled, y).item()) == Approx(host_cross_entropy(scaled, labels)).epsilon(5e-6));
  }
  CHECK(et::nn::cross_entropy(x, y).item() == first);
  // Two streams, calls alternating without waiting: each stream counts on its own word.
  const auto s1 = et::Stream<Gpu>::create(), s2 = et::Stream<Gpu>::create();
  const et::Tensor<float, 2, Gpu> doubled = x * 2.0f;
  const float want_doubled = et::nn::cross_entropy(doubled, y).item();
  std::vector<et::Tensor<float, 0, Gpu>> on1, on2;
  for (int k = 0; k < 4; ++k) {
    {
      et::StreamGuard guard(s1);
      on1.push_back(et::nn::cross_entropy(x, y));
    }
    et::StreamGuard guard(s2);
    on2.push_back(et::nn::cross_entropy(doubled, y));
  }
  s1.synchronize();
  s2.synchronize();
  for (int k = 0; k < 4; ++k) {
    CHECK(on1[static_cast<std::size_t>(k)].item() == first);
    CHECK(on2[static_cast<std::size_t>(k)].item() == want_doubled);
  }
}

TEST_CASE("GPU: cross_entropy captured in a graph replays on its stream and another, beside eager calls",
          "[nn][loss][graphs]") {
  const auto s = et::Stream<Gpu>::create(), other = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  auto x = et::randn<float>(et::cuda<0>, {3000, 130}, 5);
  const std::vector<std::int64_t> labels = some_labels(3000, 130);
  const auto y = et::from_vector(et::cuda<0>, labels, {3000});
  et::Tensor<float, 0, Gpu> loss;
  auto step = [&] { loss = et::nn::cross_entropy(x, y); };
  step();
  const float eager = loss.item();
  const auto graph = et::capture(s, step);
  CHECK(graph.kernels() == 1);
  graph.replay();
  CHECK(loss.item() == eager);
  x.copy_(x * 2.0f);
  const float want = et::nn::cross_entropy(x, y).item();
  graph.replay(other);  // on another stream, while s runs eager calls of its own
  const auto beside = et::nn::cross_entropy(x, y);
  other.synchronize();
  CHECK(loss.item() == want);
  CHECK(beside.item() == want);
  graph.replay();
  CHECK(loss.item() == want);
}
