// et::DeviceSet's scatter and gather, for any set of devices: the CPU tests run them on
// DeviceSet<Cpu, Pinned> (two host "devices" of distinct types), the GPU tests on one GPU
// and, [multi-gpu], on two. Values are compared exactly (scatter and gather only copy),
// gradients against central differences.
#pragma once

#include "gradcheck.hpp"
#include "reference.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

namespace test {

/// Rows [begin, end) of a row-major host array of rows of `row` elements.
inline std::vector<double> host_rows(const std::vector<double>& v, std::int64_t row, std::int64_t begin,
                                     std::int64_t end) {
  return {v.begin() + begin * row, v.begin() + end * row};
}

template <class Set>
void check_device_set_copies() {
  using D0 = typename Set::first_device;
  const Set set;
  constexpr auto k = std::int64_t(Set::size());
  for (const std::int64_t n : {0, 1, 2, 3, 5, 17}) {
    CAPTURE(n);
    const auto values = random_values<double>(std::size_t(n * 6), 40 + std::uint64_t(n));
    const auto x = et::from_vector(D0{}, values, {n, 2, 3});
    const auto rows = Set::balanced(n);
    std::int64_t total = 0;
    for (const auto r : rows) {
      CHECK((r == n / k || r == n / k + 1));
      total += r;
    }
    CHECK(total == n);
    const auto parts = set.scatter(x);
    std::int64_t begin = 0;
    Set::for_each([&](auto dev, auto i) {
      const auto& part = std::get<decltype(i)::value>(parts);
      static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(part)>::device_type, decltype(dev)>);
      CHECK(part.shape() == et::Shape<3>{rows[i], 2, 3});
      CHECK(part.to_vector() == host_rows(values, 6, begin, begin + rows[i]));
      begin += rows[i];
    });
    const auto back = set.gather(parts);
    CHECK(back.shape() == x.shape());
    CHECK(back.to_vector() == values);
    CHECK(set.gather(parts, et::cpu).to_vector() == values);
  }
  // Rows chosen, some devices given none; a transposed (non-contiguous) input and pieces.
  const auto values = random_values<double>(24, 3);
  const auto base = et::from_vector(D0{}, values, {4, 6});
  const auto xt = base.transpose(0, 1);  // 6 x 4, strides (1, 6)
  std::vector<double> want;
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 4; ++j) want.push_back(values[std::size_t(j * 6 + i)]);
  std::array<std::int64_t, Set::size()> rows{};
  rows.back() = 6;
  const auto parts = set.scatter(xt, rows);
  CHECK(std::get<Set::size() - 1>(parts).to_vector() == want);
  CHECK(set.gather(parts).to_vector() == want);
  auto transposed = std::apply([](const auto&... p) { return std::tuple{p.transpose(0, 1)...}; }, parts);
  CHECK(set.gather(std::apply([](const auto&... p) { return std::tuple{p.transpose(0, 1)...}; }, transposed))
            .to_vector() == want);
}

template <class Set>
void check_device_set_errors() {
  using D0 = typename Set::first_device;
  const Set set;
  const auto x = et::zeros<double>(D0{}, {5, 2});
  std::array<std::int64_t, Set::size()> rows{};
  rows[0] = 4;
  CHECK_THROWS_AS(set.scatter(x, rows), et::ShapeError);
  CHECK_THROWS_WITH(set.scatter(x, rows), Catch::Contains("add up to 4") && Catch::Contains("[5, 2]"));
  rows[0] = -1;
  CHECK_THROWS_WITH(set.scatter(x, rows), Catch::Contains("negative"));
  CHECK_THROWS_WITH(set.scatter(et::Tensor<double, 2, D0>{}), Catch::Contains("undefined"));
  auto parts = set.scatter(x);
  std::get<0>(parts) = std::get<0>(parts).slice(1, 0, 1);
  if constexpr (Set::size() > 1) {
    CHECK_THROWS_AS(set.gather(parts), et::ShapeError);
    CHECK_THROWS_WITH(set.gather(parts), Catch::Contains("only axis 0 may differ"));
  }
  std::get<0>(parts) = {};
  CHECK_THROWS_WITH(set.gather(parts), Catch::Contains("piece 0 is an undefined tensor"));
}

/// Gradients through scatter, a computation on each device, and gather.
template <class Set>
void check_device_set_gradients() {
  using D0 = typename Set::first_device;
  auto f = [](const auto& x) {
    const Set set;
    const auto parts = set.scatter(x);
    auto mapped = std::apply(
        [](const auto&... p) {
          return std::tuple{et::eval(p * p + 0.5 * p).to(typename std::remove_cvref_t<decltype(p)>::device_type{})...};
        },
        parts);
    return set.gather(mapped);
  };
  for (const std::int64_t n : {1, 3, 7}) gradcheck<D0>("scatter/gather", f, grad_input<2>({n, 3}, 90 + std::uint64_t(n)));
  // One piece needs no gradient: it sends none.
  if constexpr (Set::size() > 1) {
    const Set set;
    auto x = et::from_vector(D0{}, random_values<double>(12, 5), {4, 3});
    x.requires_grad_(true);
    auto parts = set.scatter(x);
    std::get<0>(parts) = std::get<0>(parts).detach();
    et::sum(set.gather(parts)).backward();
    std::vector<double> want(12, 1.0);
    for (std::int64_t i = 0; i < Set::balanced(4)[0] * 3; ++i) want[std::size_t(i)] = 0.0;
    CHECK(x.grad().to_vector() == want);
  }
}

}  // namespace test
