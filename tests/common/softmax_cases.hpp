// softmax, log_softmax and logsumexp (ops/softmax.hpp) on any device: the CPU tests run
// these cases on the CPU, the GPU tests on GPU 0. Every result is compared with a long
// double evaluation on the host, for rows that fit a warp, a block, or neither (read
// twice), along every axis, on transposed inputs and expressions, in double, float and
// half, and with the special values of PyTorch's conventions.
#pragma once

#include "reference.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace test {

enum class RowOp { softmax, log_softmax, logsumexp };

/// The host reference of `op` along `axis` of a row-major array of `shape`: logsumexp has
/// the axis removed.
inline std::vector<double> row_op_reference(const std::vector<double>& x, const std::vector<std::int64_t>& shape,
                                            int axis, RowOp op) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[std::size_t(d)];
  for (std::size_t d = std::size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t length = shape[std::size_t(axis)];
  std::vector<double> out(std::size_t(op == RowOp::logsumexp ? outer * inner : outer * inner * length));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t k = 0; k < inner; ++k) {
      auto at = [&](std::int64_t j) { return std::size_t((o * length + j) * inner + k); };
      long double m = -INFINITY;
      bool nan = false;
      for (std::int64_t j = 0; j < length; ++j) {
        nan = nan || std::isnan(x[at(j)]);
        m = std::max<long double>(m, x[at(j)]);
      }
      const long double shift = std::isfinite(m) ? m : 0.0L;
      long double total = 0;
      for (std::int64_t j = 0; j < length; ++j) total += std::exp(static_cast<long double>(x[at(j)]) - shift);
      const long double lse = nan ? NAN : shift + std::log(total);
      if (op == RowOp::logsumexp) {
        out[std::size_t(o * inner + k)] = double(lse);
        continue;
      }
      for (std::int64_t j = 0; j < length; ++j)
        out[at(j)] = op == RowOp::softmax ? double(std::exp(x[at(j)] - lse)) : double(x[at(j)] - lse);
    }
  }
  return out;
}

template <class E>
auto run_row_op(const E& x, int axis, RowOp op) {
  if (op == RowOp::softmax) return et::eval(et::cast<double>(et::softmax(x, axis))).to_vector();
  if (op == RowOp::log_softmax) return et::eval(et::cast<double>(et::log_softmax(x, axis))).to_vector();
  return et::eval(et::cast<double>(et::logsumexp(x, axis))).to_vector();
}

template <class T>
constexpr double row_op_tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 2e-5;
  else return 1e-2;
}

/// Every op along every axis of x (given as doubles, stored as T on D).
template <class D, class T, std::size_t R>
void check_row_ops(const std::vector<double>& values, const std::array<std::int64_t, R>& shape) {
  const auto x = et::eval(et::cast<T>(et::from_vector(D{}, values, shape)));
  const auto stored = et::eval(et::cast<double>(x)).to_vector();  // rounded to T
  const std::vector<std::int64_t> dims(shape.begin(), shape.end());
  for (int axis = 0; axis < int(R); ++axis) {
    for (const RowOp op : {RowOp::softmax, RowOp::log_softmax, RowOp::logsumexp}) {
      CAPTURE(axis, int(op));
      check_all_close(run_row_op(x, axis, op), row_op_reference(stored, dims, axis, op), row_op_tolerance<T>());
    }
  }
}

template <class D, class T>
void check_row_op_shapes() {
  // Rows of a warp (<= 512), of a block (<= 4096) and longer (read twice); edge extents.
  const std::vector<std::array<std::int64_t, 2>> shapes{{0, 5}, {3, 0}, {1, 1}, {1, 7}, {5, 1},  {4, 33},
                                                        {3, 512}, {2, 513}, {3, 4096}, {2, 4100}, {2, 9001}};
  std::uint64_t seed = 90;
  for (const auto& [rows, cols] : shapes) {
    CAPTURE(rows, cols);
    check_row_ops<D, T>(random_values<double>(std::size_t(rows * cols), ++seed, -20, 20), et::Shape<2>{rows, cols});
  }
  check_row_ops<D, T>(random_values<double>(3 * 5 * 7, 97, -20, 20), et::Shape<3>{3, 5, 7});
  check_row_ops<D, T>(random_values<double>(300, 98, -20, 20), et::Shape<1>{300});
}

/// A transposed input and an expression: the same answers as their contiguous values.
template <class D>
void check_row_op_layouts() {
  const auto values = random_values<double>(37 * 600, 99, -20, 20);
  const auto base = et::from_vector(D{}, values, {37, 600});
  const auto xt = base.transpose(0, 1);  // 600 x 37, strides (1, 600)
  const auto contiguous = et::eval(xt * 1.0);
  const auto want = et::eval(contiguous * 2.0 - 1.0);
  for (int axis = 0; axis < 2; ++axis) {
    for (const RowOp op : {RowOp::softmax, RowOp::log_softmax, RowOp::logsumexp}) {
      CAPTURE(axis, int(op));
      const auto expected = run_row_op(contiguous, axis, op);
      check_all_close(run_row_op(xt, axis, op), expected, 1e-14);
      check_all_close(run_row_op(xt * 2.0 - 1.0, axis, op), run_row_op(want, axis, op), 1e-14);
    }
  }
  static_assert(decltype(et::logsumexp(base, 1))::rank == 1 && decltype(et::logsumexp(base, 1, true))::rank == 2);
  CHECK(et::logsumexp(base, 0, true).shape() == et::Shape<2>{1, 600});
  check_all_close(et::logsumexp(base, 0, true).to_vector(), run_row_op(base, 0, RowOp::logsumexp), 1e-15);
}

/// -inf elements, rows of -inf, +inf and NaN, as PyTorch gives them.
template <class D>
void check_row_op_special_values() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int64_t cols : {3, 700, 5000}) {  // a warp's row, a block's, one read twice
    CAPTURE(cols);
    std::vector<float> v(std::size_t(4 * cols), 1.0f);
    for (std::int64_t j = 0; j < cols; ++j) v[std::size_t(j)] = j == cols - 1 ? 2.0f : -inf;  // row 0: -inf and 2
    for (std::int64_t j = 0; j < cols; ++j) v[std::size_t(cols + j)] = -inf;                  // row 1: all -inf
    v[std::size_t(2 * cols + cols / 2)] = inf;                                                 // row 2: +inf
    v[std::size_t(3 * cols + 1)] = nan;                                                        // row 3: NaN
    const auto x = et::from_vector(D{}, v, {4, cols});
    const auto s = et::softmax(x, 1).to_vector(), ls = et::log_softmax(x, 1).to_vector();
    const auto l = et::logsumexp(x, 1).to_vector();
    auto at = [&](const std::vector<float>& r, std::int64_t row, std::int64_t j) { return r[std::size_t(row * cols + j)]; };
    CHECK(at(s, 0, cols - 1) == 1.0f);
    CHECK(at(s, 0, 0) == 0.0f);
    CHECK(at(ls, 0, cols - 1) == 0.0f);
    CHECK(at(ls, 0, 0) == -inf);
    CHECK(l[0] == 2.0f);
    CHECK(std::isnan(at(s, 1, 0)));
    CHECK(std::isnan(at(ls, 1, 0)));
    CHECK(l[1] == -inf);
    CHECK(std::isnan(at(s, 2, 0)));
    CHECK(std::isnan(at(s, 2, cols / 2)));
    CHECK(at(ls, 2, 0) == -inf);
    CHECK(std::isnan(at(ls, 2, cols / 2)));
    CHECK(l[2] == inf);
    for (std::int64_t j : {std::int64_t{0}, cols - 1}) {
      CHECK(std::isnan(at(s, 3, j)));
      CHECK(std::isnan(at(ls, 3, j)));
    }
    CHECK(std::isnan(l[3]));
  }
  // exp(1000) overflows unless the maximum is subtracted.
  const auto big = et::from_vector(D{}, std::vector<double>{1000, 999, 0}, {1, 3});
  check_all_close(et::logsumexp(big, 1).to_vector(), {1000 + std::log1p(std::exp(-1.0) + std::exp(-1000.0))}, 1e-15);
}

template <class D>
void check_row_op_errors() {
  const auto x = et::zeros<float>(D{}, {2, 3});
  CHECK_THROWS_AS(et::softmax(x, 2), et::ShapeError);
  CHECK_THROWS_AS(et::log_softmax(x, -3), et::ShapeError);
  CHECK_THROWS_AS(et::logsumexp(et::Tensor<float, 2, D>{}, 1), et::Error);
}

}  // namespace test
