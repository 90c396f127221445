// gather, index_select, embedding, flip, scatter_add, cumsum, sort and topk on the CPU:
// values against references computed from coordinates in double, edge shapes (extent 0
// and 1, odd, transposed and strided inputs and indices), the messages of bad input, and
// gradients against central differences.
#include "../common/gradcheck.hpp"

#include <et/et.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

using Catch::Matchers::Contains;
using test::grad_input;
using test::gradcheck;

using test::values_of;

namespace {

/// Random indices in [0, bound).
std::vector<std::int64_t> indices_of(std::int64_t n, std::int64_t bound, std::uint64_t seed) {
  return test::random_values<std::int64_t>(static_cast<std::size_t>(n), seed, 0, static_cast<double>(bound - 1));
}

/// Element (i, j) of a 2-D tensor of any layout.
template <class T>
T at(const et::Tensor<T, 2>& t, std::int64_t i, std::int64_t j) {
  return t.data()[i * t.strides()[0] + j * t.strides()[1]];
}

}  // namespace

TEST_CASE("gather and index_select read the indexed elements, any layout", "[index]") {
  for (auto [rows, cols, width] : {std::array<std::int64_t, 3>{5, 7, 3}, {1, 1, 1}, {4, 9, 9}, {3, 4, 0}}) {
    CAPTURE(rows, cols, width);
    const auto x = et::from_vector(et::cpu, values_of(rows * cols, 1), {cols, rows}).transpose(0, 1);  // [rows, cols]
    const auto idx = et::from_vector(et::cpu, indices_of(rows * width, cols, 2), {rows, width});
    const auto g = et::gather(x, 1, idx);
    REQUIRE(g.shape() == et::Shape<2>{rows, width});
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < width; ++j) CHECK(at(g, i, j) == at(x, i, at(idx, i, j)));
    // Along axis 0, an index narrower than x off the axis.
    const auto idx0 = et::from_vector(et::cpu, indices_of(2 * cols, rows, 3), {2, cols});
    const auto g0 = et::gather(x, 0, idx0);
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < cols; ++j) CHECK(at(g0, i, j) == at(x, at(idx0, i, j), j));
  }
  // index_select with repeats and a strided index, along each axis, and on int32.
  const auto x = et::from_vector(et::cpu, values_of(12, 4), {3, 4});
  const auto picks = et::from_vector(et::cpu, std::vector<std::int64_t>{2, 9, 0, 9, 2, 9}, {6}).slice(0, 0, 6, 2);
  const auto s = et::index_select(x, 0, picks);  // rows 2, 0, 2
  REQUIRE(s.shape() == et::Shape<2>{3, 4});
  for (std::int64_t j = 0; j < 4; ++j) {
    CHECK(at(s, 0, j) == at(x, 2, j));
    CHECK(at(s, 1, j) == at(x, 0, j));
    CHECK(at(s, 2, j) == at(x, 2, j));
  }
  const et::Tensor<std::int32_t, 2> counted = et::cast<std::int32_t>(et::arange<std::int64_t>(et::cpu, 12).reshape({3, 4}));
  const auto cols = et::index_select(counted, -1,
                                     et::from_vector(et::cpu, std::vector<std::int64_t>{3, 1}, {2}));
  CHECK(cols.to_vector() == std::vector<std::int32_t>{3, 1, 7, 5, 11, 9});
  CHECK(et::index_select(x, 1, et::zeros<std::int64_t>(et::cpu, {0})).shape() == et::Shape<2>{3, 0});
}

TEST_CASE("embedding gives the rows of a table, any index shape", "[index]") {
  const auto table = et::from_vector(et::cpu, values_of(5 * 3, 5), {5, 3});
  const auto tokens = et::from_vector(et::cpu, std::vector<std::int64_t>{4, 0, 4, 1, 2, 3}, {2, 3});
  const auto e = et::embedding(table, tokens);
  REQUIRE(e.shape() == et::Shape<3>{2, 3, 3});
  const auto tv = tokens.to_vector();
  const auto ev = e.to_vector(), wv = table.to_vector();
  for (std::size_t k = 0; k < tv.size(); ++k)
    for (std::size_t c = 0; c < 3; ++c) CHECK(ev[k * 3 + c] == wv[static_cast<std::size_t>(tv[k]) * 3 + c]);
  CHECK(et::embedding(table, et::zeros<std::int64_t>(et::cpu, {0})).shape() == et::Shape<2>{0, 3});
}

TEST_CASE("flip reverses any set of axes of any layout", "[index]") {
  const auto x = et::from_vector(et::cpu, values_of(24, 6), {4, 6}).slice(1, 0, 6, 2);  // [4, 3], strided
  const auto f0 = et::flip(x, 0), f01 = et::flip(x, {0, -1});
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      CHECK(at(f0, i, j) == at(x, 3 - i, j));
      CHECK(at(f01, i, j) == at(x, 3 - i, 2 - j));
    }
  CHECK(et::flip(et::zeros<float>(et::cpu, {0, 3}), {0, 1}).shape() == et::Shape<2>{0, 3});
  CHECK(et::flip(et::arange<std::int64_t>(et::cpu, 3), 0).to_vector() == std::vector<std::int64_t>{2, 1, 0});
  CHECK_THROWS_WITH(et::flip(x, {1, -1}), Contains("flip: axis 1 is named twice"));
}

TEST_CASE("scatter_add adds every source element at its index; repeats add up", "[index]") {
  const std::int64_t rows = 4, cols = 5;
  const auto x = et::from_vector(et::cpu, values_of(rows * cols, 7), {rows, cols});
  const auto src = et::from_vector(et::cpu, values_of(3 * cols * 2, 8), {3, cols * 2}).slice(1, 0, cols * 2, 2);
  const auto idx = et::from_vector(et::cpu, indices_of(3 * cols, rows, 9), {3, cols});
  const auto y = et::scatter_add(x, 0, idx, src);
  std::vector<double> expected = x.to_vector();
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      expected[static_cast<std::size_t>(at(idx, i, j) * cols + j)] += at(src, i, j);
  const auto got = y.to_vector();
  for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == Approx(expected[k]).epsilon(1e-14));
  CHECK(x.to_vector() == et::from_vector(et::cpu, values_of(rows * cols, 7), {rows, cols}).to_vector());  // untouched
  // Integers, all into one place.
  const auto counts = et::scatter_add(et::zeros<std::int64_t>(et::cpu, {3}), 0, et::zeros<std::int64_t>(et::cpu, {5}),
                                      et::ones<std::int64_t>(et::cpu, {5}));
  CHECK(counts.to_vector() == std::vector<std::int64_t>{5, 0, 0});
}

TEST_CASE("cumsum along any axis: floating types keep theirs, integers give int64", "[scan]") {
  for (auto [rows, cols] : {std::array<std::int64_t, 2>{3, 7}, {1, 1}, {5, 0}, {0, 4}, {2, 1000}}) {
    CAPTURE(rows, cols);
    const auto x = et::from_vector(et::cpu, values_of(rows * cols, 10), {cols, rows}).transpose(0, 1);
    const auto c1 = et::cumsum(x, 1), c0 = et::cumsum(x, 0);
    REQUIRE(c1.shape() == x.shape());
    for (std::int64_t i = 0; i < rows; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < cols; ++j) CHECK(at(c1, i, j) == Approx(sum += at(x, i, j)).epsilon(1e-13));
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (std::int64_t i = 0; i < rows; ++i) CHECK(at(c0, i, j) == Approx(sum += at(x, i, j)).epsilon(1e-13));
    }
  }
  const et::Tensor<std::int64_t, 1> ints = et::cumsum(et::full<std::int32_t>(et::cpu, {4}, 1 << 30), 0);
  CHECK(ints.to_vector() == std::vector<std::int64_t>{1LL << 30, 2LL << 30, 3LL << 30, 4LL << 30});
  const auto flags = et::from_vector(et::cpu, std::vector<bool>{true, false, true}, {3});
  CHECK(et::cumsum(flags, 0).to_vector() == std::vector<std::int64_t>{1, 1, 2});
  const auto halves = et::cumsum(et::full<et::half>(et::cpu, {3}, 0.5), 0);
  CHECK(et::eval(et::cast<float>(halves)).to_vector() == std::vector<float>{0.5f, 1.0f, 1.5f});
}

TEST_CASE("sort is stable, puts NaN last, and gives each value's position", "[scan]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = et::from_vector(et::cpu, std::vector<double>{3, nan, 1, 3, -2, 1}, {6});
  const auto [up, from] = et::sort(x, 0);
  const auto uv = up.to_vector();
  CHECK(std::vector<double>(uv.begin(), uv.end() - 1) == std::vector<double>{-2, 1, 1, 3, 3});
  CHECK(std::isnan(uv.back()));
  CHECK(from.to_vector() == std::vector<std::int64_t>{4, 2, 5, 0, 3, 1});
  const auto [down, from_down] = et::sort(x, 0, true);
  CHECK(from_down.to_vector() == std::vector<std::int64_t>{1, 0, 3, 2, 5, 4});

  // Random rows along either axis of a transposed tensor, against std::stable_sort.
  for (auto [rows, cols] : {std::array<std::int64_t, 2>{4, 9}, {1, 1}, {3, 0}, {2, 700}}) {
    CAPTURE(rows, cols);
    const auto m = et::from_vector(et::cpu, values_of(rows * cols, 11), {cols, rows}).transpose(0, 1);
    for (bool descending : {false, true}) {
      const auto [values, indices] = et::sort(m, 1, descending);
      REQUIRE(values.shape() == m.shape());
      for (std::int64_t i = 0; i < rows; ++i) {
        std::vector<double> row;
        for (std::int64_t j = 0; j < cols; ++j) row.push_back(at(m, i, j));
        std::vector<double> sorted = row;
        std::stable_sort(sorted.begin(), sorted.end(), [&](double a, double b) { return descending ? b < a : a < b; });
        for (std::int64_t j = 0; j < cols; ++j) {
          CHECK(at(values, i, j) == sorted[static_cast<std::size_t>(j)]);
          CHECK(row[static_cast<std::size_t>(at(indices, i, j))] == at(values, i, j));
        }
      }
      CHECK(et::gather(m, 1, indices).to_vector() == values.to_vector());
    }
  }
  const auto [iv, ii] = et::sort(et::from_vector(et::cpu, std::vector<std::int32_t>{5, -1, 5, 0}, {4}), 0);
  CHECK(iv.to_vector() == std::vector<std::int32_t>{-1, 0, 5, 5});
  CHECK(ii.to_vector() == std::vector<std::int64_t>{1, 3, 0, 2});
}

TEST_CASE("the GPU's sort keys order values as the CPU's comparison does", "[scan]") {
  // The CUDA sort sorts unsigned keys (backend/index_ops.hpp): their order must be sorts_before's.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> doubles{-inf, -1e300, -2.5, -1e-310, -0.0, 0.0, 1e-310, 3.0, 1e300, inf, nan, -nan};
  for (double a : doubles)
    for (double b : doubles) {
      CAPTURE(a, b);
      CHECK((et::detail::ordered_key(a) < et::detail::ordered_key(b)) == et::detail::sorts_before(a, b, false));
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      CHECK((et::detail::ordered_key(fa) < et::detail::ordered_key(fb)) == et::detail::sorts_before(fa, fb, false));
      const et::bfloat16 ha(fa), hb(fb);
      CHECK((et::detail::ordered_key(ha) < et::detail::ordered_key(hb)) ==
            et::detail::sorts_before(float(ha), float(hb), false));
    }
  const std::vector<std::int64_t> ints{INT64_MIN, -5, -1, 0, 1, 7, INT64_MAX};
  for (std::int64_t a : ints)
    for (std::int64_t b : ints) CHECK((et::detail::ordered_key(a) < et::detail::ordered_key(b)) == (a < b));
  CHECK(et::detail::ordered_key(std::int32_t{-1}) < et::detail::ordered_key(std::int32_t{0}));
  CHECK(et::detail::ordered_key(false) < et::detail::ordered_key(true));
}

TEST_CASE("topk gives the k largest or smallest in order", "[scan]") {
  const auto x = et::from_vector(et::cpu, std::vector<float>{0.5f, 4, -1, 4, 2, 3, 9, 1}, {2, 4});
  const auto [top, at_top] = et::topk(x, 2, 1);
  CHECK(top.to_vector() == std::vector<float>{4, 4, 9, 3});
  CHECK(at_top.to_vector() == std::vector<std::int64_t>{1, 3, 2, 1});
  const auto [low, at_low] = et::topk(x, 1, 0, false);
  CHECK(low.to_vector() == std::vector<float>{0.5f, 3, -1, 1});
  CHECK(at_low.to_vector() == std::vector<std::int64_t>{0, 1, 0, 1});
  CHECK(et::topk(x, 0, 1).values.shape() == et::Shape<2>{2, 0});
  CHECK_THROWS_WITH(et::topk(x, 5, 1), Contains("topk: k = 5 outside [0, 4] for axis 1 of a tensor of shape [2, 4]"));
}

TEST_CASE("indexing operations: bad input is an et:: error", "[index][errors]") {
  const auto x = et::zeros<float>(et::cpu, {2, 3});
  const auto idx = et::from_vector(et::cpu, std::vector<std::int64_t>{0, 3}, {1, 2});
  CHECK_THROWS_WITH(et::gather(x, 1, idx), Contains("gather: indices range over [0, 3], outside [0, 3) of axis 1"));
  CHECK_THROWS_WITH(et::gather(x, 1, et::full<std::int64_t>(et::cpu, {1, 1}, -1)), Contains("outside [0, 3)"));
  CHECK_THROWS_WITH(et::gather(x, 0, et::zeros<std::int64_t>(et::cpu, {1, 4})),
                    Contains("gather: index of shape [1, 4] is longer than the input [2, 3] along axis 1"));
  CHECK_THROWS_WITH(et::gather(x, 2, idx), Contains("gather: axis 2 is out of range for shape [2, 3]"));
  CHECK_THROWS_WITH(et::index_select(x, 0, et::full<std::int64_t>(et::cpu, {1}, 2)),
                    Contains("index_select: indices range over [2, 2], outside [0, 2) of axis 0"));
  CHECK_THROWS_WITH(et::embedding(x, et::full<std::int64_t>(et::cpu, {2}, 5)), Contains("outside [0, 2)"));
  CHECK_THROWS_WITH(et::scatter_add(x, 1, et::zeros<std::int64_t>(et::cpu, {1, 2}), et::zeros<float>(et::cpu, {1, 1})),
                    Contains("scatter_add: index of shape [1, 2] is longer than the source [1, 1] along axis 1"));
  CHECK_THROWS_WITH(et::gather(et::Tensor<float, 2>{}, 0, idx), Contains("gather on an undefined"));
  CHECK_THROWS_WITH(et::cumsum(x, -3), Contains("cumsum: axis -3 is out of range"));
  CHECK_THROWS_WITH(et::sort(et::Tensor<float, 1>{}, 0), Contains("sort on an undefined"));
}

TEST_CASE("gradients of the indexing operations, cumsum, sort and topk (CPU)", "[index][autograd]") {
  using et::Cpu;
  const auto x = grad_input<2>({3, 4}, 21), src = grad_input<2>({2, 4}, 22);
  const auto idx = et::from_vector(et::cpu, std::vector<std::int64_t>{2, 0, 0, 1, 2, 2, 1, 0}, {2, 4});
  const auto rows = et::from_vector(et::cpu, std::vector<std::int64_t>{1, 1, 2, 0, 1}, {5});
  gradcheck<Cpu>("gather along 0 (repeated indices)", [&](const auto& a) { return et::gather(a, 0, idx); }, x);
  gradcheck<Cpu>("gather along 1 of a transposed input",
                 [&](const auto& a) { return et::gather(a.transpose(0, 1), 1, idx.slice(1, 0, 3)); }, x);
  gradcheck<Cpu>("index_select with repeats", [&](const auto& a) { return et::index_select(a, 0, rows); }, x);
  gradcheck<Cpu>("embedding", [&](const auto& a) { return et::embedding(a, idx); }, x);
  gradcheck<Cpu>("flip of both axes, then a product",
                 [](const auto& a) { return et::eval(et::flip(a, {0, 1}) * a); }, x);
  gradcheck<Cpu>("scatter_add into x from src",
                 [&](const auto& a, const auto& s) { return et::scatter_add(a, 0, idx, s); }, x, src);
  gradcheck<Cpu>("cumsum along 0 and along 1 of a transposed input",
                 [](const auto& a) { return et::eval(et::cumsum(a, 0) + et::cumsum(a.transpose(0, 1), 1).transpose(0, 1)); },
                 x);
  gradcheck<Cpu>("sort descending along 1", [](const auto& a) { return et::sort(a, 1, true).values; }, x);
  gradcheck<Cpu>("topk 2 along 0", [](const auto& a) { return et::topk(a, 2, 0).values; }, x);
}
