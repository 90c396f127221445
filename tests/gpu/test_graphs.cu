// CUDA graphs: et::capture records what a function queues on a stream, replay() runs it
// again with one launch, on the same memory, with the eager results; CUPTI sees the
// captured kernels run on each replay. Capturing something that waits for the device fails
// with an et::Error, and the stream works afterwards. A whole training step is captured
// once and replayed.
#include <catch2/catch.hpp>

#include <et/et.hpp>
#include <et/nn.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/reference.hpp"
#include "cupti_counter.hpp"

namespace {
using Gpu = et::Cuda<0>;
using Catch::Matchers::Contains;
}  // namespace

TEST_CASE("a captured graph replays elementwise, reductions and matmul with the eager results", "[graphs][cupti]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  auto x = et::randn<float>(et::cuda<0>, {257, 64}, 1);
  const auto w = et::randn<float>(et::cuda<0>, {64, 33}, 2);
  et::Tensor<float, 2, Gpu> y = et::zeros<float>(et::cuda<0>, {257, 33});
  et::Tensor<float, 0, Gpu> total;
  auto step = [&] {
    y = et::relu(et::matmul(x, w)) * 0.5f + 1.0f;
    total = et::sum(y * y);  // a new tensor each time: inside the capture, from the graph's memory
  };
  step();  // warm-up: cuBLASLt's state for s exists before the capture
  const std::vector<float> eager_y = y.to_vector();
  const float eager_total = total.item();

  y = 0.0f;
  const et::MemoryStats before = et::memory_stats(et::cuda<0>);
  const auto graph = et::capture(s, step);
  CHECK(graph.kernels() >= 3);
  CHECK(et::memory_stats(et::cuda<0>).reserved > before.reserved);  // the graph's memory for `total`
  CHECK(y.to_vector() == std::vector<float>(y.numel(), 0.0f));  // captured, not run

  test::LaunchCounter counter;
  graph.replay();
  graph.replay();
  const test::Launches seen = counter.stop();
  CHECK(seen.kernels() == 2 * graph.kernels());
  CHECK(seen.graph_launches() == 2);  // one launch per replay, as the driver reports it
  CHECK(seen.kernels_outside_graphs() == 0);
  CHECK(y.to_vector() == eager_y);
  CHECK(total.item() == eager_total);  // `total` escaped the capture: its storage is the graph's

  // New inputs, written into x's storage: the replay reads them.
  x.copy_(x * 2.0f);
  graph.replay();
  const std::vector<float> replayed_y = y.to_vector();
  const float replayed_total = total.item();
  step();  // eager, for reference (`total` now leaves the graph's memory)
  CHECK(replayed_y == y.to_vector());
  CHECK(replayed_total == total.item());
  CHECK(replayed_total != eager_total);
  graph.replay();  // the graph still owns what `total` held
  s.synchronize();
}

// [cuda-error]: the failed capture is a CUDA API error on purpose (compute-sanitizer skips it).
TEST_CASE("capturing a function that waits for the device fails clearly, and the stream goes on",
          "[graphs][cuda-error]") {
  const auto s = et::Stream<Gpu>::create();
  const auto x = et::ones<float>(et::cuda<0>, {1000});
  CHECK_THROWS_WITH(et::capture(s, [&] { (void)et::sum(x).item(); }),
                    Contains("et: capturing a CUDA graph failed") && Contains("cudaStreamSynchronize") &&
                        Contains("run it once before capturing"));
  et::StreamGuard guard(s);
  const et::Tensor<float, 1, Gpu> y = x * 3.0f;
  CHECK(et::sum(y).item() == 3000.0f);
}

TEST_CASE("a graph keeps the memory of the tensors created in it until the last one goes", "[graphs][allocator]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  const auto x = et::randn<float>(et::cuda<0>, {1 << 20}, 5);
  s.synchronize();
  const et::MemoryStats before = et::memory_stats(et::cuda<0>);
  et::Tensor<float, 1, Gpu> kept;
  {
    const auto graph = et::capture(s, [&] { kept = et::Tensor<float, 1, Gpu>(et::exp(x) - 1.0f); });
    CHECK(et::memory_stats(et::cuda<0>).allocated == before.allocated + (std::size_t{1} << 22));
    graph.replay();
  }  // the graph goes; `kept` still holds its block
  const auto xs = x.to_vector(), ks = kept.to_vector();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) wrong += !test::close(ks[i], std::exp(double(xs[i])) - 1.0, 1e-5);
  CHECK(wrong == 0);
  kept = et::Tensor<float, 1, Gpu>();
  CHECK(et::memory_stats(et::cuda<0>).allocated == before.allocated);
  CHECK(et::memory_stats(et::cuda<0>).reserved <= before.reserved);
}

TEST_CASE("a convolution is captured and replayed like any call", "[graphs][conv]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  const auto x = et::randn<float>(et::cuda<0>, {2, 8, 12, 12}, 7), w = et::randn<float>(et::cuda<0>, {16, 8, 3, 3}, 8);
  et::Tensor<float, 4, Gpu> y;
  auto forward = [&] { y = et::conv2d(x, w, {.padding = {1, 1}}); };
  forward();  // warm-up: the algorithm search runs eagerly
  const auto eager = y.to_vector();
  const auto graph = et::capture(s, forward);
  graph.replay();
  CHECK(y.to_vector() == eager);
}

namespace {
/// A small classifier and its optimizer, the same values for the same seed.
struct Trainer {
  et::nn::Sequential<et::nn::Linear<float, Gpu>, et::nn::ReLU, et::nn::Linear<float, Gpu>> model;
  et::optim::SGD<float, Gpu> opt;
  explicit Trainer(std::uint64_t seed)
      : model(et::nn::Linear<float, Gpu>(et::cuda<0>, 32, 64, seed), et::nn::ReLU{},
              et::nn::Linear<float, Gpu>(et::cuda<0>, 64, 10, seed + 1)),
        opt(model.parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4}) {}
  /// One training step: forward, loss, backward, gradient clipping and the update.
  void step(const et::Tensor<float, 2, Gpu>& x, const et::Tensor<std::int64_t, 1, Gpu>& labels) {
    opt.zero_grad();
    auto loss = et::nn::cross_entropy(model(x), labels);
    loss.backward();
    (void)et::nn::clip_grad_norm_(model.parameters(), 0.5);
    opt.step();
  }
};
}  // namespace

TEST_CASE("a whole training step (forward, loss, backward, clipping, SGD) captured once, replayed, equals eager steps",
          "[graphs][optim]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  const auto x = et::randn<float>(et::cuda<0>, {128, 32}, 3);
  const auto labels = et::Tensor<std::int64_t, 1, Gpu>(et::cast<std::int64_t>(et::rand<float>(et::cuda<0>, {128}, 4) * 10.0f));
  Trainer eager(7), captured(7);
  eager.step(x, labels);  // warm-up: the optimizer's state, the libraries' handles, the gradients exist
  captured.step(x, labels);
  const auto graph = et::capture(s, [&] { captured.step(x, labels); });
  constexpr int steps = 5;
  for (int k = 0; k < steps; ++k) {
    eager.step(x, labels);
    graph.replay();
  }
  s.synchronize();
  const auto a = eager.model.parameters(), b = captured.model.parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    CAPTURE(k);
    const auto want = a[k].data().to_vector(), got = b[k].data().to_vector();
    CHECK(got == want);  // the same kernels on the same values: bit for bit
  }
  CHECK(a[0].data().to_vector() != Trainer(7).model.parameters()[0].data().to_vector());  // it trained
}

TEST_CASE("capturing an Adam step throws (its step counts live on the host), and training goes on eagerly",
          "[graphs][optim]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  auto w = et::randn<float>(et::cuda<0>, {64, 32}, 1);
  w.requires_grad_(true);
  const auto x = et::randn<float>(et::cuda<0>, {8, 64}, 2);
  et::optim::Adam opt(et::optim::parameters(w), {.lr = 1e-3});
  auto step = [&] {
    opt.zero_grad(true);
    et::sum(et::eval(et::matmul(x, w))).backward();
    opt.step();
  };
  step();  // warm-up
  CHECK_THROWS_WITH(et::capture(s, step), Contains("Adam and AdamW count their steps on the host"));
  const auto before = w.to_vector();
  step();
  CHECK(w.to_vector() != before);
}
