// Statements of several outputs (et::assign, et::sum_of/max_of/min_of), matrix-vector
// products, rounding and modulo functors and index grids, shared by the CPU and GPU tests
// (test_hpc.cpp / .cu). Every value against a double-precision loop on the same inputs, with
// edge shapes (0, 1, odd, long rows, non-contiguous destinations, broadcast operands), the
// rows path on and off, and the errors of bad statements.
#pragma once

#include "reference.hpp"
#include "stencil_cases.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// CG's update, x += alpha p, r -= alpha Ap, rr = sum(r_new^2), with alpha a 0-d tensor, on
/// an n x m space (destinations windows of larger arrays when `windows`), against doubles.
template <class D>
void check_update_statement(std::int64_t n, std::int64_t m, bool windows) {
  using et::range;
  CAPTURE(n, m, windows);
  const auto big_x = uniform_tensor<D, 2>({n + 2, m + 3}, 31), big_r = uniform_tensor<D, 2>({n + 2, m + 3}, 32);
  const auto p = uniform_tensor<D, 2>({n, m}, 33), ap = uniform_tensor<D, 2>({n, m}, 34);
  const auto x0 = et::eval(big_x(range(1, n + 1), range(2, m + 2))).to_vector();
  const auto r0 = et::eval(big_r(range(1, n + 1), range(2, m + 2))).to_vector();
  const auto pv = p.to_vector(), av = ap.to_vector();
  std::vector<double> want_x(x0.size()), want_r(x0.size());
  double want_rr = 0;
  for (std::size_t i = 0; i < x0.size(); ++i) {
    want_x[i] = x0[i] + 0.375 * pv[i];
    want_r[i] = r0[i] - 0.375 * av[i];
    want_rr += want_r[i] * want_r[i];
  }
  for (const bool rows : {true, false}) {
    RowsPath path(rows);
    auto bx = big_x.clone(), br = big_r.clone();
    et::Tensor<float, 2, D> x = windows ? bx(range(1, n + 1), range(2, m + 2)) : et::eval(bx(range(1, n + 1), range(2, m + 2)));
    et::Tensor<float, 2, D> r = windows ? br(range(1, n + 1), range(2, m + 2)) : et::eval(br(range(1, n + 1), range(2, m + 2)));
    const auto alpha = et::scalar<float>(D{}, 0.375f);
    auto rr = et::scalar<float>(D{}, -1.0f);
    const auto r_new = r - alpha * ap;
    et::assign(std::tie(x, r, rr), x + alpha * p, r_new, et::sum_of(r_new * r_new));
    check_all_close(et::eval(x).to_vector(), want_x, 1e-6);
    check_all_close(et::eval(r).to_vector(), want_r, 1e-6);
    CHECK(std::abs(rr.item() - want_rr) <= 1e-5 * std::max(1.0, want_rr));
    if (windows) {  // the border around the windows is untouched
      CHECK(bx(0).to_vector() == big_x(0).to_vector());
      CHECK(br(range(), 0).to_vector() == big_r(range(), 0).to_vector());
    }
  }
}

/// Finals (0-d destinations computed after the pass, reading the values from before it),
/// reductions alone, one destination, max and min, an empty space.
template <class D>
void check_statement_forms() {
  using et::range;
  auto q = uniform_tensor<D, 2>({5, 300}, 41);
  const auto qv = q.to_vector();
  auto rr = et::scalar<float>(D{}, 4.0f);
  const auto fresh = et::scalar<float>(D{}, 2.0f);
  et::assign(std::tie(q, rr), q * (fresh / rr), fresh);  // every element reads rr = 4, then rr = 2
  CHECK(rr.item() == 2.0f);
  std::vector<double> halves(qv.begin(), qv.end());
  for (double& v : halves) v *= 0.5;
  check_all_close(q.to_vector(), halves, 1e-7);

  auto total = et::scalar<float>(D{});
  et::assign(total, et::sum_of(q * 2.0f));
  double want = 0, high = -1e30, low = 1e30;
  for (const float v : qv) want += v, high = std::max<double>(high, v), low = std::min<double>(low, v);
  CHECK(std::abs(total.item() - want) <= 1e-4 * std::max(1.0, std::abs(want)));
  auto hi = et::scalar<float>(D{}), lo = et::scalar<float>(D{});
  et::assign(std::tie(hi, lo), et::max_of(q), et::min_of(q));  // no element destination: q's shape is the space
  CHECK(hi.item() == float(high * 0.5));
  CHECK(lo.item() == float(low * 0.5));

  const auto none = et::zeros<float>(D{}, {0, 7});
  et::assign(total, et::sum_of(none));
  CHECK(total.item() == 0.0f);
  CHECK_THROWS_WITH(et::assign(hi, et::max_of(none)), Catch::Contains("max_of over an empty index space [0, 7]"));

  auto one = et::scalar<float>(D{}, 3.0f), two = et::scalar<float>(D{}, 5.0f);  // a 0-d statement: swapped
  et::assign(std::tie(one, two), two, one);
  CHECK(one.item() == 5.0f);
  CHECK(two.item() == 3.0f);
}

/// Reads of another element of a destination (values from before the statement, part by
/// part), gradients (recorded part by part), and the errors.
template <class D>
void check_statement_edges() {
  using et::range;
  auto u = et::eval(et::index_grid<float>(D{}, {10}, 0));  // 0 .. 9
  auto other = et::zeros<float>(D{}, {9});
  auto ahead = u(range(1)), behind = u(range(0, -1));
  et::assign(std::tie(ahead, other), behind * 10.0f, ahead + behind);  // u[1:] = 10 u[:-1] from the old u
  const auto uv = u.to_vector(), ov = other.to_vector();
  for (int i = 1; i < 10; ++i) CHECK(uv[std::size_t(i)] == float(10 * (i - 1)));
  for (int i = 0; i < 9; ++i) CHECK(ov[std::size_t(i)] == float(2 * i + 1));

  auto w = uniform_tensor<D, 1>({6}, 51);
  w.requires_grad_(true);
  auto y = et::zeros<float>(D{}, {6});
  auto s = et::scalar<float>(D{});
  et::assign(std::tie(y, s), w * w, et::sum_of(w * 3.0f));
  et::eval(et::sum(y) + s).backward();
  const auto wv = w.detach().to_vector(), g = w.grad().to_vector();
  for (int i = 0; i < 6; ++i) CHECK(std::abs(g[std::size_t(i)] - (2.0f * wv[std::size_t(i)] + 3.0f)) <= 1e-5f);

  auto a = et::zeros<float>(D{}, {4, 5}), b = et::zeros<float>(D{}, {4, 6});
  auto t = et::scalar<float>(D{});
  CHECK_THROWS_WITH(et::assign(std::tie(a, b), a + 1.0f, b + 1.0f), Catch::Contains("et: assign: a destination has shape [4, 6]"));
  CHECK_THROWS_WITH(et::assign(std::tie(a, a), a + 1.0f, a * 2.0f), Catch::Contains("two destinations share storage and overlap"));
  auto left = a(range(), range(0, 3)), right = a(range(), range(2));
  CHECK_THROWS_WITH(et::assign(std::tie(left, right), left + 1.0f, right + 1.0f), Catch::Contains("overlap"));
  CHECK_THROWS_WITH(et::assign(std::tie(a, t), a + 1.0f, et::sum_of(et::zeros<float>(D{}, {4, 4}))),
                    Catch::Contains("sum_of's operand has shape [4, 4], the statement's index space [4, 5]"));
  et::Tensor<float, 2, D> undefined;
  CHECK_THROWS_WITH(et::assign(std::tie(undefined, t), a, et::sum_of(a)), Catch::Contains("undefined"));
  CHECK_THROWS_AS(et::assign(std::tie(a), et::zeros<float>(D{}, {3, 5})), et::ShapeError);
}

/// matmul with a vector: [m, n] @ [n], [n] @ [n, m], a batch, and y = alpha A x + beta y as
/// one GEMM, against doubles; transposed and strided operands.
template <class D>
void check_matvec() {
  for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{37, 53}, {1, 1}, {1, 9}, {64, 1}, {0, 5}}) {
    CAPTURE(m, n);
    const auto a = uniform_tensor<D, 2>({m, n}, 61), at = uniform_tensor<D, 2>({n, m}, 62).transpose(0, 1);
    const auto x = uniform_tensor<D, 1>({2 * n}, 63)(et::range(0, 2 * n, 2));  // a stepped vector
    auto y = uniform_tensor<D, 1>({m}, 64);
    const auto av = a.to_vector(), atv = et::eval(at).to_vector(), xv = et::eval(x).to_vector(), yv = y.to_vector();
    std::vector<double> ax(std::size_t(m), 0.0), atx(std::size_t(m), 0.0), update(std::size_t(m), 0.0);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        ax[std::size_t(i)] += double(av[std::size_t(i * n + j)]) * xv[std::size_t(j)];
        atx[std::size_t(i)] += double(atv[std::size_t(i * n + j)]) * xv[std::size_t(j)];
      }
      update[std::size_t(i)] = 2.0 * ax[std::size_t(i)] - 0.5 * yv[std::size_t(i)];
    }
    const et::Tensor<float, 1, D> got = et::matmul(a, x);
    check_all_close(got.to_vector(), ax, 1e-4);
    check_all_close(et::Tensor<float, 1, D>(et::matmul(at, x)).to_vector(), atx, 1e-4);
    const auto& counters = et::detail::gemm_counters();
    const auto before = counters.cpu_gemms.load() + counters.lt_matmuls.load() + counters.cublas_gemms.load();
    y = 2.0f * et::matmul(a, x) - 0.5f * y;  // one GEMM with alpha and beta
    const auto after = counters.cpu_gemms.load() + counters.lt_matmuls.load() + counters.cublas_gemms.load();
    if (m > 0 && n > 0) CHECK(after - before == 1);
    check_all_close(y.to_vector(), update, 1e-4);
    if (m > 0) {  // [m] @ [m, n] -> [n]: x^T A
      const auto v = uniform_tensor<D, 1>({m}, 65);
      const auto vv = v.to_vector();
      std::vector<double> va(std::size_t(n), 0.0);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) va[std::size_t(j)] += double(vv[std::size_t(i)]) * av[std::size_t(i * n + j)];
      check_all_close(et::Tensor<float, 1, D>(et::matmul(v, a)).to_vector(), va, 1e-4);
    }
  }
  const auto batch = uniform_tensor<D, 3>({3, 4, 5}, 66);
  const auto x = uniform_tensor<D, 1>({5}, 67);
  const et::Tensor<float, 2, D> bx = et::matmul(batch, x);
  const auto bv = batch.to_vector(), xv = x.to_vector(), got = bx.to_vector();
  REQUIRE(bx.shape() == et::Shape<2>{3, 4});
  for (int k = 0; k < 12; ++k) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) sum += double(bv[std::size_t(k * 5 + j)]) * xv[std::size_t(j)];
    CHECK(std::abs(got[std::size_t(k)] - sum) <= 1e-4);
  }
  CHECK_THROWS_AS(et::eval(et::matmul(uniform_tensor<D, 2>({3, 4}, 68), uniform_tensor<D, 1>({5}, 69))), et::ShapeError);
}

/// floor, ceil, trunc, round (ties to even), fmod and remainder (their signs), integers kept;
/// index grids against np.indices.
template <class D>
void check_rounding_and_grids() {
  const std::vector<float> values{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 5.25f, -5.25f, 0.0f};
  const auto x = et::from_vector(D{}, values, {9});
  const auto host = [](const auto& e) { return et::eval(e).to_vector(); };
  CHECK(host(et::round(x)) == std::vector<float>{-2, -2, -0.0f, 0, 2, 2, 5, -5, 0});
  CHECK(host(et::floor(x)) == std::vector<float>{-3, -2, -1, 0, 1, 2, 5, -6, 0});
  CHECK(host(et::ceil(x)) == std::vector<float>{-2, -1, -0.0f, 1, 2, 3, 6, -5, 0});
  CHECK(host(et::trunc(x)) == std::vector<float>{-2, -1, -0.0f, 0, 1, 2, 5, -5, 0});
  CHECK(host(et::fmod(x, 2.0f)) == std::vector<float>{-0.5f, -1.5f, -0.5f, 0.5f, 1.5f, 0.5f, 1.25f, -1.25f, 0});
  CHECK(host(et::remainder(x, 2.0f)) == std::vector<float>{1.5f, 0.5f, 1.5f, 0.5f, 1.5f, 0.5f, 1.25f, 0.75f, 0});
  CHECK(host(et::remainder(x, -2.0f)) == std::vector<float>{-0.5f, -1.5f, -0.5f, -1.5f, -0.5f, -1.5f, -0.75f, -1.25f, 0});
  const auto i = et::from_vector(D{}, std::vector<std::int32_t>{-7, 7, -7, 7, 3, 5}, {6});
  const auto j = et::from_vector(D{}, std::vector<std::int32_t>{3, -3, -3, 3, 0, -1}, {6});
  CHECK(host(et::remainder(i, j)) == std::vector<std::int32_t>{2, -2, -1, 1, 0, 0});
  CHECK(host(et::fmod(i, j)) == std::vector<std::int32_t>{-1, 1, -1, 1, 0, 0});
  CHECK(host(et::floor(i)) == std::vector<std::int32_t>{-7, 7, -7, 7, 3, 5});
  auto w = uniform_tensor<D, 1>({4}, 71);
  w.requires_grad_(true);
  et::sum(et::fmod(w * 3.0f, 1.0f) + et::floor(w)).backward();
  CHECK(w.grad().to_vector() == std::vector<float>(4, 3.0f));

  const auto rows = host(et::index_grid<std::int64_t>(D{}, {3, 4, 5}, 0));
  const auto cols = host(et::index_grid<float>(D{}, {3, 4, 5}, -1));
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c) {
        CHECK(rows[std::size_t((a * 4 + b) * 5 + c)] == a);
        CHECK(cols[std::size_t((a * 4 + b) * 5 + c)] == float(c));
      }
  CHECK(host(et::index_grid<float>(D{}, {0, 3}, 1)).empty());
  CHECK_THROWS_AS(et::index_grid<float>(D{}, {3, 4}, 2), et::ShapeError);
}

/// matvec_pair(A, x, y) = {A x, A^T y} against doubles: row-major, column-major, stepped and
/// padded layouts of A, empty and narrow shapes (the GPU's two-product path below 128 columns),
/// the same bits on a second run, double and bfloat16, gradients (recorded as two products),
/// errors.
template <class D, class T = float>
void check_matvec_pair_layouts(std::int64_t m, std::int64_t n, double tolerance) {
  using et::range;
  CAPTURE(m, n);
  const auto to_t = [](const auto& f) { return et::eval(et::cast<T>(f)); };
  const auto x = to_t(uniform_tensor<D, 1>({n}, 71)), y = to_t(uniform_tensor<D, 1>({2 * m}, 72))(range(0, 2 * m, 2));
  const et::Tensor<T, 2, D> layouts[] = {
      to_t(uniform_tensor<D, 2>({m, n}, 73)), to_t(uniform_tensor<D, 2>({n, m}, 74)).transpose(0, 1),
      to_t(uniform_tensor<D, 2>({m, 2 * n}, 75))(range(), range(0, 2 * n, 2)),
      to_t(uniform_tensor<D, 2>({m, n + 3}, 76))(range(), range(0, n))};
  const auto xv = et::eval(et::cast<double>(x)).to_vector(), yv = et::eval(et::cast<double>(y)).to_vector();
  for (const auto& a : layouts) {
    const auto av = et::eval(et::cast<double>(a)).to_vector();
    std::vector<double> ax(std::size_t(m), 0.0), aty(std::size_t(n), 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        ax[std::size_t(i)] += av[std::size_t(i * n + j)] * xv[std::size_t(j)];
        aty[std::size_t(j)] += av[std::size_t(i * n + j)] * yv[std::size_t(i)];
      }
    const auto [q, s] = et::matvec_pair(a, x, y);
    REQUIRE(q.shape() == et::Shape<1>{m});
    REQUIRE(s.shape() == et::Shape<1>{n});
    check_scaled_close(et::eval(et::cast<double>(q)).to_vector(), ax, tolerance, "A x differs from doubles");
    check_scaled_close(et::eval(et::cast<double>(s)).to_vector(), aty, tolerance, "A^T y differs from doubles");
    const auto again = et::matvec_pair(a, x, y);  // a fixed order of sums: the same bits
    CHECK(et::eval(et::cast<double>(again.ax)).to_vector() == et::eval(et::cast<double>(q)).to_vector());
    CHECK(et::eval(et::cast<double>(again.aty)).to_vector() == et::eval(et::cast<double>(s)).to_vector());
  }
}

template <class D>
void check_matvec_pair() {
  for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{37, 53}, {1, 1}, {0, 5}, {5, 0}, {1, 300},
                             {300, 1}, {3, 300}, {300, 130}, {513, 700}, {2, 1000}})
    check_matvec_pair_layouts<D>(m, n, 1e-5);
  check_matvec_pair_layouts<D, double>(129, 257, 1e-14);
  check_matvec_pair_layouts<D, et::bfloat16>(40, 300, 1e-2);
  // Gradients: sum(A x) + sum(A^T y) gives dA[i][j] = x[j] + y[i], dx = A's column sums,
  // dy = its row sums.
  auto a = uniform_tensor<D, 2>({6, 140}, 77);
  auto x = uniform_tensor<D, 1>({140}, 78), y = uniform_tensor<D, 1>({6}, 79);
  a.requires_grad_(true), x.requires_grad_(true), y.requires_grad_(true);
  const auto [q, s] = et::matvec_pair(a, x, y);
  et::Tensor<float, 0, D> total = et::sum(q) + et::sum(s);
  total.backward();
  const auto av = a.detach().to_vector(), xv = x.detach().to_vector(), yv = y.detach().to_vector();
  const auto ga = a.grad().to_vector(), gx = x.grad().to_vector(), gy = y.grad().to_vector();
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 140; ++j) CHECK(ga[i * 140 + j] == Approx(xv[j] + yv[i]));
  for (std::size_t j = 0; j < 140; ++j) {
    double column = 0;
    for (std::size_t i = 0; i < 6; ++i) column += av[i * 140 + j];
    CHECK(gx[j] == Approx(column).margin(1e-5));
  }
  for (std::size_t i = 0; i < 6; ++i) {
    double row = 0;
    for (std::size_t j = 0; j < 140; ++j) row += av[i * 140 + j];
    CHECK(gy[i] == Approx(row).margin(1e-4));
  }
  CHECK_THROWS_WITH(et::matvec_pair(a.detach(), y.detach(), y.detach()),
                    Catch::Contains("et: matvec_pair: A of shape [6, 140] needs x of shape [140] and y of shape [6]"));
  CHECK_THROWS_AS(et::matvec_pair(et::Tensor<float, 2, D>{}, x.detach(), y.detach()), et::Error);
}

}  // namespace test
