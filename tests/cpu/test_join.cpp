// cat, stack, pad and one_hot on the CPU: values against references built from
// coordinates, edge shapes (empty parts, extent 0, rank 0 parts, non-contiguous inputs),
// the messages of bad input, and gradients against central differences.
#include "../common/gradcheck.hpp"

#include <et/et.hpp>
#include <et/ops/join.hpp>

#include <cstdint>
#include <vector>

using Catch::Matchers::Contains;
using test::grad_input;
using test::gradcheck;

using test::values_of;

TEST_CASE("cat joins along any axis, views and empty parts included", "[join]") {
  const auto a = et::from_vector(et::cpu, values_of(6, 1), {2, 3});
  const auto b = et::from_vector(et::cpu, values_of(12, 2), {4, 3});
  const auto rows = et::cat({a, b}, 0);
  CHECK(rows.shape() == et::Shape<2>{6, 3});
  std::vector<double> expected = a.to_vector();
  for (double v : b.to_vector()) expected.push_back(v);
  CHECK(rows.to_vector() == expected);

  // Along the last axis (-1), with a transposed (non-contiguous) part and an empty one.
  const auto c = et::from_vector(et::cpu, values_of(4, 3), {2, 2}).transpose(0, 1);
  const auto none = et::zeros<double>(et::cpu, {2, 0});
  const auto columns = et::cat({a, none, c}, -1);
  REQUIRE(columns.shape() == et::Shape<2>{2, 5});
  const auto av = a.to_vector(), cv = c.contiguous().to_vector(), got = columns.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      CHECK(got[i * 5 + j] == (j < 3 ? av[i * 3 + j] : cv[i * 2 + (j - 3)]));

  const auto ints = et::cat({et::arange<std::int64_t>(et::cpu, 3), et::arange<std::int64_t>(et::cpu, 2)}, 0);
  CHECK(ints.to_vector() == std::vector<std::int64_t>{0, 1, 2, 0, 1});
}

TEST_CASE("stack adds an axis at any place; rank-0 parts make a vector", "[join]") {
  const auto a = et::from_vector(et::cpu, values_of(6, 4), {2, 3});
  const auto b = et::from_vector(et::cpu, values_of(6, 5), {2, 3});
  for (int axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const auto s = et::stack({a, b}, axis);
    const int at = axis < 0 ? axis + 3 : axis;
    CHECK(s.size(at) == 2);
    CHECK(s.select(at, 0).contiguous().to_vector() == a.to_vector());
    CHECK(s.select(at, 1).contiguous().to_vector() == b.to_vector());
  }
  const et::Tensor<double, 0> x = et::sum(a), y = et::sum(b);
  CHECK(et::stack({x, y}, 0).to_vector() == std::vector<double>{x.item(), y.item()});
}

TEST_CASE("pad surrounds a tensor with a value on each side of each axis", "[join]") {
  const auto x = et::from_vector(et::cpu, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const auto p = et::pad(x, {{{1, 0}, {0, 2}}}, 7.0f);
  CHECK(p.shape() == et::Shape<2>{3, 5});
  CHECK(p.to_vector() == std::vector<float>{7, 7, 7, 7, 7, 1, 2, 3, 7, 7, 4, 5, 6, 7, 7});
  CHECK(et::pad(x.transpose(0, 1), {{{0, 0}, {1, 1}}}).to_vector() ==
        std::vector<float>{0, 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0});
  CHECK(et::pad(et::zeros<float>(et::cpu, {0}), {{{2, 1}}}, 3.0f).to_vector() == std::vector<float>{3, 3, 3});
}

TEST_CASE("one_hot: int64 rows with a 1 at each label", "[join]") {
  const auto labels = et::from_vector(et::cpu, std::vector<std::int64_t>{0, 2, 1, 2}, {2, 2});
  const auto h = et::one_hot(labels, 3);
  CHECK(h.shape() == et::Shape<3>{2, 2, 3});
  CHECK(h.to_vector() == std::vector<std::int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1});
  CHECK(et::one_hot(et::zeros<std::int64_t>(et::cpu, {0}), 4).shape() == et::Shape<2>{0, 4});
  CHECK_THROWS_WITH(et::one_hot(labels, 2), Contains("labels range over [0, 2], outside [0, 2)"));
  CHECK_THROWS_AS(et::one_hot(labels, -1), et::ShapeError);
}

TEST_CASE("cat, stack and pad: bad input is an et:: error", "[join][errors]") {
  const auto a = et::zeros<float>(et::cpu, {2, 3});
  const auto b = et::zeros<float>(et::cpu, {2, 4});
  CHECK_THROWS_WITH(et::cat({a, b}, 0), Contains("tensor 1 has shape [2, 4], tensor 0 [2, 3] (only axis 0 may differ)"));
  CHECK(et::cat({a, b}, 1).shape() == et::Shape<2>{2, 7});
  CHECK_THROWS_WITH(et::cat(std::vector<et::Tensor<float, 2>>{}, 0), Contains("cat of no tensors"));
  CHECK_THROWS_WITH(et::cat({a, et::Tensor<float, 2>{}}, 0), Contains("tensor 1 is undefined"));
  CHECK_THROWS_WITH(et::cat({a, a}, 2), Contains("cat: axis 2 is out of range for shape [2, 3]"));
  CHECK_THROWS_WITH(et::stack({a, b}, 0), Contains("(all must be equal)"));
  CHECK_THROWS_WITH(et::stack({a, a}, 3), Contains("stack: axis 3 is out of range"));
  CHECK_THROWS_WITH(et::pad(a, {{{0, -1}, {0, 0}}}), Contains("pad: negative width {0, -1} at axis 0"));
}

TEST_CASE("gradients of cat, stack and pad (CPU)", "[join][autograd]") {
  using et::Cpu;
  const auto x = grad_input<2>({2, 3}, 11), y = grad_input<2>({1, 3}, 12), z = grad_input<2>({2, 3}, 13);
  gradcheck<Cpu>("cat along 0, the second part used twice",
                 [](const auto& a, const auto& b) { return et::cat({a, b, et::eval(b * b)}, 0); }, x, y);
  gradcheck<Cpu>("cat of a transposed part along 1",
                 [](const auto& a, const auto& c) { return et::cat({a.transpose(0, 1), c.transpose(0, 1)}, 1); }, x,
                 z);
  gradcheck<Cpu>("stack along a middle axis", [](const auto& a, const auto& c) { return et::stack({a, et::eval(et::tanh(c))}, 1); },
                 x, z);
  gradcheck<Cpu>("pad, then a function of the padded tensor",
                 [](const auto& a) { return et::eval(et::exp(et::pad(a, {{{1, 1}, {2, 0}}}, 0.5) * 0.5)); }, x);
}
