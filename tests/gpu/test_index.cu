// gather, index_select, embedding, flip, scatter_add, cumsum, sort and topk on a GPU:
// the CPU tests (tests/cpu/test_index.cpp) check the values against references; these
// check that cuda:0 gives the CPU's answer (exactly, where no sum is involved; to the
// float rounding of a different order of addition where one is), gradients included, on
// random data large enough for many blocks and CUB's multi-pass paths.
#define ET_WITH_CUB 1  // cumsum, sort and topk on the GPU (ops/scan.hpp)
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../common/reference.hpp"
#include "../common/version_cases.hpp"

using Catch::Matchers::Contains;

namespace {

template <class T, int R>
et::Tensor<T, R, et::Cpu> random_cpu(const et::Shape<R>& shape, std::uint64_t seed) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<T> values;
  for (double v : test::random_values<double>(static_cast<std::size_t>(n), seed, -4.0, 4.0))
    values.push_back(static_cast<T>(v));
  return et::from_vector(et::cpu, values, shape);
}

template <int R>
et::Tensor<std::int64_t, R, et::Cpu> random_indices(const et::Shape<R>& shape, std::int64_t bound, std::uint64_t seed) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<std::int64_t> values;
  for (double v : test::random_values<double>(static_cast<std::size_t>(n), seed, 0.0, static_cast<double>(bound)))
    values.push_back(std::min<std::int64_t>(static_cast<std::int64_t>(v), bound - 1));
  return et::from_vector(et::cpu, values, shape);
}

/// The GPU's result against the CPU's, each element within test::close's tolerance.
template <class A, class B>
void check_matches_cpu(const A& gpu, const B& cpu, double tolerance) {
  test::check_all_close(et::eval(et::cast<double>(gpu)).to(et::cpu).to_vector(),
                        et::eval(et::cast<double>(cpu)).to_vector(), tolerance);
}

}  // namespace

TEST_CASE("gather, index_select, embedding, flip and scatter_add on cuda:0 give the CPU's values", "[index]") {
  const auto x = random_cpu<float, 2>({1000, 37}, 1).transpose(0, 1);  // [37, 1000], transposed
  const auto xg = x.to(et::cuda<0>);
  const auto idx = random_indices<2>({37, 513}, 1000, 2);
  const auto idxg = idx.to(et::cuda<0>);
  CHECK(et::gather(xg, 1, idxg).to(et::cpu).to_vector() == et::gather(x, 1, idx).to_vector());
  const auto rows = random_indices<1>({4099}, 37, 3);
  CHECK(et::index_select(xg, 0, rows.to(et::cuda<0>)).to(et::cpu).to_vector() == et::index_select(x, 0, rows).to_vector());
  const auto tokens = random_indices<2>({8, 20}, 37, 15);
  CHECK(et::embedding(xg, tokens.to(et::cuda<0>)).to(et::cpu).to_vector() == et::embedding(x, tokens).to_vector());
  CHECK(et::flip(xg, {0, 1}).to(et::cpu).to_vector() == et::flip(x, {0, 1}).to_vector());
  const auto halves = random_cpu<et::half, 3>({5, 6, 7}, 4);
  CHECK(et::eval(et::cast<float>(et::flip(halves.to(et::cuda<0>), {-1}))).to(et::cpu).to_vector() ==
        et::eval(et::cast<float>(et::flip(halves, {-1}))).to_vector());

  // scatter_add: many indices onto few rows, so atomics collide.
  const auto into = random_cpu<float, 2>({7, 1000}, 5);
  const auto to_rows = random_indices<2>({4000, 1000}, 7, 6);
  const auto src = random_cpu<float, 2>({4000, 1000}, 7);
  check_matches_cpu(et::scatter_add(into.to(et::cuda<0>), 0, to_rows.to(et::cuda<0>), src.to(et::cuda<0>)),
                    et::scatter_add(into, 0, to_rows, src), 1e-4);
  for (auto type_case : {0, 1, 2, 3}) {
    CAPTURE(type_case);
    const auto ints = random_indices<1>({3000}, 11, 8);
    auto scatter = [&](auto zero, auto dev) {
      using T = decltype(zero);
      const auto counts = et::zeros<T>(dev, {11});
      return et::scatter_add(counts, 0, ints.to(dev), et::ones<T>(dev, {3000}));
    };
    if (type_case == 0) CHECK(scatter(std::int64_t{}, et::cuda<0>).to(et::cpu).to_vector() == scatter(std::int64_t{}, et::cpu).to_vector());
    if (type_case == 1) CHECK(scatter(std::int32_t{}, et::cuda<0>).to(et::cpu).to_vector() == scatter(std::int32_t{}, et::cpu).to_vector());
    if (type_case == 2) check_matches_cpu(scatter(et::bfloat16{}, et::cuda<0>), scatter(et::bfloat16{}, et::cpu), 1e-2);
    // uint8: 11 neighbouring bytes in three 32-bit words (compare-and-swap), about 270
    // additions each, so every count wraps past 255 as the CPU's does.
    if (type_case == 3) CHECK(scatter(std::uint8_t{}, et::cuda<0>).to(et::cpu).to_vector() == scatter(std::uint8_t{}, et::cpu).to_vector());
  }
  CHECK_THROWS_WITH(et::gather(xg, 1, et::full<std::int64_t>(et::cuda<0>, {1, 1}, 1000)),
                    Contains("gather: indices range over [1000, 1000], outside [0, 1000) of axis 1"));
}

TEST_CASE("uint8: sort and cumsum on cuda:0 order bytes above 127 last, as the CPU", "[scan][uint8]") {
  std::mt19937_64 rng(12);
  std::vector<std::uint8_t> bytes(300 * 1001);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const auto x = et::from_vector(et::cpu, bytes, {300, 1001});
  const auto [values, indices] = et::sort(x.to(et::cuda<0>), 1);
  const auto [cpu_values, cpu_indices] = et::sort(x, 1);
  CHECK(values.to(et::cpu).to_vector() == cpu_values.to_vector());
  CHECK(indices.to(et::cpu).to_vector() == cpu_indices.to_vector());  // stable on both: ties in order
  CHECK(et::cumsum(x.to(et::cuda<0>), 1).to(et::cpu).to_vector() == et::cumsum(x, 1).to_vector());  // int64
}

TEST_CASE("cumsum, sort and topk on cuda:0 (CUB) give the CPU's values", "[scan]") {
  for (auto [rows, cols] : {std::array<std::int64_t, 2>{300, 1001}, {1, 1 << 20}, {1 << 16, 3}, {4, 0}, {1, 1}}) {
    CAPTURE(rows, cols);
    const auto x = random_cpu<float, 2>({rows, cols}, 9);
    const auto xg = x.to(et::cuda<0>);
    // float sums in another order: the CPU adds in double; rows of 2^20 values of |x| < 4.
    check_matches_cpu(et::cumsum(xg, 1), et::cumsum(x, 1), cols > 4096 ? 1e-3 : 1e-4);
    check_matches_cpu(et::cumsum(xg, 0), et::cumsum(x, 0), rows > 4096 ? 1e-3 : 1e-4);
    for (bool descending : {false, true}) {
      const auto [values, indices] = et::sort(xg, 1, descending);
      const auto [cpu_values, cpu_indices] = et::sort(x, 1, descending);
      CHECK(values.to(et::cpu).to_vector() == cpu_values.to_vector());
      CHECK(indices.to(et::cpu).to_vector() == cpu_indices.to_vector());  // random floats: no ties
    }
    if (rows > 1) {
      const auto [along0, at0] = et::sort(xg, 0);
      CHECK(at0.to(et::cpu).to_vector() == et::sort(x, 0).indices.to_vector());
    }
    const std::int64_t k = std::min<std::int64_t>(cols, 5);
    CHECK(et::topk(xg, k, 1).values.to(et::cpu).to_vector() == et::topk(x, k, 1).values.to_vector());
  }
  // Integers (int64 sums, exact), ties kept in order, half keys, NaN last.
  const auto ints = random_indices<2>({3, 5000}, 50, 10);
  CHECK(et::cumsum(ints.to(et::cuda<0>), 1).to(et::cpu).to_vector() == et::cumsum(ints, 1).to_vector());
  CHECK(et::sort(ints.to(et::cuda<0>), 1).indices.to(et::cpu).to_vector() == et::sort(ints, 1).indices.to_vector());
  const auto halves = random_cpu<et::half, 2>({7, 300}, 11);
  CHECK(et::sort(halves.to(et::cuda<0>), 1, true).indices.to(et::cpu).to_vector() ==
        et::sort(halves, 1, true).indices.to_vector());
  const auto with_nan = et::from_vector(et::cpu, std::vector<float>{2, NAN, -1, 5}, {4});
  CHECK(et::sort(with_nan.to(et::cuda<0>), 0).indices.to(et::cpu).to_vector() == std::vector<std::int64_t>{2, 0, 3, 1});
  CHECK(et::sort(with_nan.to(et::cuda<0>), 0, true).indices.to(et::cpu).to_vector() ==
        std::vector<std::int64_t>{1, 3, 0, 2});
  // int64 sums that overflow wrap around as on the CPU (added as uint64: no undefined behaviour).
  const std::int64_t top = std::numeric_limits<std::int64_t>::max(), bottom = std::numeric_limits<std::int64_t>::min();
  CHECK(et::cumsum(et::full<std::int64_t>(et::cuda<0>, {2}, top), 0).to(et::cpu).to_vector() ==
        std::vector<std::int64_t>{top, -2});
  CHECK(et::cumsum(et::full<std::int64_t>(et::cuda<0>, {2}, bottom), 0).to(et::cpu).to_vector() ==
        std::vector<std::int64_t>{bottom, 0});
  CHECK(et::cumsum(et::full<std::int32_t>(et::cuda<0>, {3}, -1), 0).to(et::cpu).to_vector() ==
        std::vector<std::int64_t>{-1, -2, -3});
  // -0 equals +0 (ties keep their order), as on the CPU; CUB alone would put -0 first.
  const auto zeros = et::from_vector(et::cpu, std::vector<float>{0.0f, -0.0f, 0.0f, -1.0f}, {4});
  CHECK(et::sort(zeros.to(et::cuda<0>), 0).indices.to(et::cpu).to_vector() == std::vector<std::int64_t>{3, 0, 1, 2});
  CHECK(et::sort(zeros, 0).indices.to_vector() == std::vector<std::int64_t>{3, 0, 1, 2});
}

TEST_CASE("gradients through the indexing operations on cuda:0 equal the CPU's", "[index][autograd]") {
  const auto x = random_cpu<double, 2>({64, 33}, 12);
  const auto idx = random_indices<2>({64, 50}, 33, 13);
  const auto w = random_cpu<double, 2>({64, 33}, 14);
  auto grad_of = [&](auto dev) {
    auto leaf = x.to(dev);
    leaf.requires_grad_(true);
    const auto i = idx.to(dev);
    const auto g = et::gather(leaf, 1, i);
    const auto c = et::cumsum(leaf, 0);
    const auto s = et::sort(leaf, 1, true).values;
    const auto t = et::topk(leaf, 3, 0).values;
    const auto e = et::embedding(leaf, i.slice(0, 0, 2).slice(1, 0, 10));
    const auto f = et::flip(leaf, {0});
    const auto loss = et::sum(g * g) + et::sum(c * w.to(dev)) + et::sum(s * w.to(dev)) + et::sum(t * t) + et::sum(e) +
                      et::sum(f * w.to(dev));
    et::eval(loss).backward();
    return leaf.grad().to(et::cpu);
  };
  check_matches_cpu(grad_of(et::cuda<0>), grad_of(et::cpu), 1e-12);
}

TEST_CASE("GPU: writing sort's returned indices is seen by its backward", "[scan][autograd][version]") {
  test::check_sort_versions<et::Cuda<0>>();
}
