// CUDA graphs: et::capture records what a function queues on a stream, replay() runs it
// again with one launch, on the same memory, with the eager results; CUPTI sees the
// captured kernels run on each replay. Capturing something that waits for the device fails
// with an et::Error, and the stream works afterwards.
#include <catch2/catch.hpp>

#include <et/et.hpp>

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
