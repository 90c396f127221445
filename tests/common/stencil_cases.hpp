// HPC codes' surfaces, shared by the CPU and GPU tests (test_hpc.cpp / .cu):
//  - t(...): several axes at once (et::range, integers), its layout against slice()/select()
//    chains, bounds errors, gradients;
//  - windows: assigning a tensor to one writes; a plain handle still rebinds;
//  - stencils over shifted views (jacobi-2d, heat-3d) against a double-precision loop on odd
//    shapes, with the rows path on and off, and which path ran;
//  - random expressions over windows of one array: the rows and general paths agree (to the
//    last bits a compiler's contraction of a multiply-add may change).
#pragma once

#include "random_values.hpp"
#include "reference.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// The rows path on or off for a scope.
struct RowsPath {
  bool previous;
  explicit RowsPath(bool on) : previous(et::detail::rows_path_enabled().exchange(on)) {}
  ~RowsPath() { et::detail::rows_path_enabled() = previous; }
};

template <class D, int R>
et::Tensor<float, R, D> uniform_tensor(const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  std::int64_t n = 1;
  for (const auto e : shape) n *= e;
  const auto values = random_values<float>(static_cast<std::size_t>(n), seed, Uniform{-2.0, 2.0});
  return et::from_vector(D{}, values, shape);
}

/// t(...) against the same view made by slice()/select(), on a 4-D tensor; errors; the
/// gradient of a window (ones where it reads, zeros elsewhere).
template <class D>
void check_indexing() {
  using et::range;
  const auto u = uniform_tensor<D, 4>({5, 6, 7, 8}, 1);
  const auto same = [](const auto& a, const auto& b) {
    REQUIRE(a.shape() == b.shape());
    CHECK(a.strides() == b.strides());
    CHECK(a.data() == b.data());
  };
  same(u(range(1, -1), range(), range(2), range(0, 7, 3)), u.slice(0, 1, -1).slice(2, 2, 7).slice(3, 0, 7, 3));
  same(u(2, range(1, 3)), u.select(0, 2).slice(0, 1, 3));
  same(u(-1, -2, range(-3)), u.select(0, 4).select(0, 4).slice(0, 4, 7));
  same(u(range(), range(), range(), range()), u);
  same(u(range(5)), u.slice(0, 5, 5));  // an empty window
  const auto scalar = u(1, 2, 3, 4);
  static_assert(std::decay_t<decltype(scalar)>::rank == 0);
  CHECK(scalar.is_window());
  CHECK(scalar.item() == u.select(0, 1).select(0, 2).select(0, 3).select(0, 4).item());
  CHECK_THROWS_AS(u(range(1, 9)), et::ShapeError);
  CHECK_THROWS_WITH(u(range(), range(4, 3)), Catch::Contains("et: t(...): range(4, 3) at axis 1") &&
                                                 Catch::Contains("out of range"));
  CHECK_THROWS_WITH(u(range(), 6), Catch::Contains("et: t(...): 6 at axis 1") && Catch::Contains("extent 6"));
  CHECK_THROWS_WITH(u(-6), Catch::Contains("-6 at axis 0"));
  CHECK_THROWS_WITH(u(range(0, 4, 0)), Catch::Contains("the step must be at least 1"));
  CHECK_THROWS_WITH((et::Tensor<float, 2, D>{}(range())), Catch::Contains("t(...) on an undefined"));

  auto w = uniform_tensor<D, 2>({4, 5}, 2);
  w.requires_grad_(true);
  et::sum(w(range(1, 3), range(0, 5, 2)) * 3.0f).backward();
  std::vector<float> want(20, 0.0f);
  for (int i = 1; i < 3; ++i)
    for (int j = 0; j < 5; j += 2) want[std::size_t(i * 5 + j)] = 3.0f;
  CHECK(w.grad().to_vector() == want);
}

/// A window is written by assignment (also from a window of the same array, through a
/// temporary where they overlap); a plain handle, and slice()'s views, still rebind.
template <class D>
void check_windows() {
  using et::range;
  auto a = uniform_tensor<D, 2>({6, 7}, 3);
  const auto before = a.to_vector();
  auto b = et::zeros<float>(D{}, {6, 7});
  auto b_in = b(range(1, -1), range(1, -1));
  const auto a_in = a(range(1, -1), range(1, -1));
  b_in = a_in;  // written
  CHECK(b_in.data() != a_in.data());
  const auto got = b.to_vector();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 7; ++j) {
      const bool inside = i >= 1 && i < 5 && j >= 1 && j < 6;
      CHECK(got[std::size_t(i * 7 + j)] == (inside ? before[std::size_t(i * 7 + j)] : 0.0f));
    }
  et::Tensor<float, 2, D> copy = a_in;  // a copy of a window's handle is a window
  CHECK(copy.is_window());
  auto shifted = a(range(0, -2), range(0, -2));
  shifted = a_in;  // overlapping windows of one array: the values from before the statement
  const auto after = a.to_vector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) CHECK(after[std::size_t(i * 7 + j)] == before[std::size_t((i + 1) * 7 + j + 1)]);
  et::Tensor<float, 2, D> handle = a.slice(0, 0, 2);
  handle = b;  // rebinds (API.md), no data moves
  CHECK(handle.data() == b.data());
  CHECK(!handle.is_window());
  CHECK_THROWS_AS((b_in = et::zeros<float>(D{}, {3, 3})), et::ShapeError);
}

/// et::noalias(dst) = expr: one kernel straight into dst (no temporary where another window
/// of dst's storage is read), compound forms, a temporary view, recording onto the named
/// tensor, and its errors.
template <class D>
void check_noalias() {
  using et::range;
  for (const std::int64_t n : {0, 1, 7, 1000}) {
    CAPTURE(n);
    auto x = uniform_tensor<D, 1>({2 * n}, 9);
    const auto before = x.to_vector();
    const auto blocks = [] { return et::memory_stats(D{}).total_allocations; };
    auto low = x(range(0, n));
    const auto high = x(range(n, 2 * n));
    auto start = blocks();
    low = high * 2.0f;  // checked: the two windows share a storage, so a temporary first
    CHECK(blocks() - start == (n > 0 ? 1u : 0u));
    start = blocks();
    et::noalias(low) = high * 2.0f;  // promised: straight in
    et::noalias(x(range(0, n))) += high;  // a temporary view, and a compound form
    CHECK(blocks() == start);
    const auto got = x.to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      CHECK(got[std::size_t(i)] == 3.0f * before[std::size_t(n + i)]);
      CHECK(got[std::size_t(n + i)] == before[std::size_t(n + i)]);
    }
  }
  // Recorded: the history lands on the tensor named, and the gradient is the expression's.
  auto w = et::ones<float>(D{}, {5});
  w.requires_grad_(true);
  et::Tensor<float, 1, D> y = w * 1.0f;
  et::noalias(y) = w * 3.0f;
  et::sum(y).backward();
  for (const float g : w.grad().to_vector()) CHECK(g == 3.0f);
  et::Tensor<float, 1, D> undefined;
  CHECK_THROWS_WITH(et::noalias(undefined) = w * 2.0f, Catch::Contains("et: noalias() on an undefined"));
  auto z = et::zeros<float>(D{}, {4});
  CHECK_THROWS_AS(et::noalias(z) = et::zeros<float>(D{}, {3}), et::ShapeError);
}

/// jacobi-2d's sweep into B's interior from five windows of A, on an n x m grid.
template <class D>
void check_jacobi(std::int64_t n, std::int64_t m, bool rows_expected) {
  using et::range;
  CAPTURE(n, m);
  const auto a = uniform_tensor<D, 2>({n, m}, 4);
  const auto host = a.to_vector();
  std::vector<double> want(std::size_t(n * m), 0.0);
  for (std::int64_t i = 1; i + 1 < n; ++i)
    for (std::int64_t j = 1; j + 1 < m; ++j) {
      const auto at = [&](std::int64_t r, std::int64_t c) { return double(host[std::size_t(r * m + c)]); };
      want[std::size_t(i * m + j)] = 0.2 * (at(i, j) + at(i, j - 1) + at(i, j + 1) + at(i + 1, j) + at(i - 1, j));
    }
  std::vector<std::vector<float>> results;
  for (const bool rows : {true, false}) {
    RowsPath path(rows);
    auto b = et::zeros<float>(D{}, {n, m});
    const auto counts = et::elementwise_path_counts();
    b(range(1, -1), range(1, -1)) = 0.2f * (a(range(1, -1), range(1, -1)) + a(range(1, -1), range(0, -2)) +
                                            a(range(1, -1), range(2)) + a(range(2), range(1, -1)) +
                                            a(range(0, -2), range(1, -1)));
    const auto after = et::elementwise_path_counts();
    if (n > 3 && m > 3) CHECK((after.rows > counts.rows) == (rows && rows_expected));
    results.push_back(b.to_vector());
    check_all_close(results.back(), want, 1e-6);
  }
}

/// heat-3d's sweep (a 7-point stencil) from windows of A into B's interior.
template <class D>
void check_heat(std::int64_t n0, std::int64_t n1, std::int64_t n2) {
  using et::range;
  CAPTURE(n0, n1, n2);
  const auto a = uniform_tensor<D, 3>({n0, n1, n2}, 5);
  const auto host = a.to_vector();
  std::vector<double> want(std::size_t(n0 * n1 * n2), 0.0);
  const auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return double(host[std::size_t((i * n1 + j) * n2 + k)]); };
  for (std::int64_t i = 1; i + 1 < n0; ++i)
    for (std::int64_t j = 1; j + 1 < n1; ++j)
      for (std::int64_t k = 1; k + 1 < n2; ++k)
        want[std::size_t((i * n1 + j) * n2 + k)] =
            0.125 * (at(i + 1, j, k) - 2 * at(i, j, k) + at(i - 1, j, k)) +
            0.125 * (at(i, j + 1, k) - 2 * at(i, j, k) + at(i, j - 1, k)) +
            0.125 * (at(i, j, k + 1) - 2 * at(i, j, k) + at(i, j, k - 1)) + at(i, j, k);
  std::vector<std::vector<float>> results;
  for (const bool rows : {true, false}) {
    RowsPath path(rows);
    auto b = et::zeros<float>(D{}, {n0, n1, n2});
    const auto v = [&](int di, int dj, int dk) {
      return a(range(1 + di, n0 - 1 + di), range(1 + dj, n1 - 1 + dj), range(1 + dk, n2 - 1 + dk));
    };
    b(range(1, -1), range(1, -1), range(1, -1)) = 0.125f * (v(1, 0, 0) - 2.0f * v(0, 0, 0) + v(-1, 0, 0)) +
                                                   0.125f * (v(0, 1, 0) - 2.0f * v(0, 0, 0) + v(0, -1, 0)) +
                                                   0.125f * (v(0, 0, 1) - 2.0f * v(0, 0, 0) + v(0, 0, -1)) + v(0, 0, 0);
    results.push_back(b.to_vector());
    check_all_close(results.back(), want, 1e-5);
  }
}

/// Random statements over windows of one array and a broadcast row: the rows path and the
/// general path agree, on shapes with long and short rows and odd offsets.
template <class D>
void check_rows_against_general() {
  using et::range;
  std::mt19937_64 engine(11);
  for (int trial = 0; trial < 24; ++trial) {
    const std::int64_t rows = 1 + std::int64_t(engine() % 9), cols = 1 + std::int64_t(engine() % 300);
    const std::int64_t h0 = std::int64_t(engine() % 3), w0 = std::int64_t(engine() % 3);
    CAPTURE(trial, rows, cols, h0, w0);
    const auto a = uniform_tensor<D, 2>({rows + 3, cols + 3}, 20 + trial);
    const auto bias = uniform_tensor<D, 1>({cols}, 60 + trial);
    std::vector<std::vector<float>> results;
    for (const bool on : {true, false}) {
      RowsPath path(on);
      auto out = et::zeros<float>(D{}, {rows + 2, cols + 1});
      out(range(1, rows + 1), range(0, cols)) =
          et::tanh(a(range(h0, h0 + rows), range(w0, w0 + cols))) * bias -
          a(range(3 - h0, 3 - h0 + rows), range(3 - w0, 3 - w0 + cols)) / (1.5f + bias * bias);
      results.push_back(out.to_vector());
    }
    check_all_close(results[0], std::vector<double>(results[1].begin(), results[1].end()), 1e-6);
  }
}

}  // namespace test
