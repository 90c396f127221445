// Matrix products on the CPU (Eigen) against a double-precision triple loop: every
// element type, odd and degenerate shapes, batches of 1 and 5 with broadcasting,
// transposed and sliced operands read in place (counted), the lowering of expressions
// around products, and the shape errors.
#include "../common/matmul_reference.hpp"

#include <et/et.hpp>

#include <random>
#include <string>
#include <tuple>

using Catch::Matchers::Contains;
using test::Layout;

namespace {

struct Dims {
  std::int64_t m, k, n;
};

const et::detail::GemmCounters& counters() { return et::detail::gemm_counters(); }

}  // namespace

TEMPLATE_TEST_CASE("matmul matches a double-precision product", "[matmul]", float, double, et::half, et::bfloat16) {
  using T = TestType;
  const Dims d = GENERATE(Dims{1, 1, 1}, Dims{17, 33, 9}, Dims{64, 64, 64}, Dims{3, 130, 5}, Dims{1, 300, 2},
                          Dims{40, 1, 33});
  CAPTURE(d.m, d.k, d.n);
  const double tolerance = test::product_tolerance<T>();
  auto values = [](std::int64_t count, std::uint64_t seed) {
    return test::uniform<T>(static_cast<std::size_t>(count), seed);
  };
  SECTION("matrix @ matrix") {
    const auto a = et::from_vector(et::cpu, values(d.m * d.k, 1), {d.m, d.k});
    const auto b = et::from_vector(et::cpu, values(d.k * d.n, 2), {d.k, d.n});
    const et::Tensor<T, 2, et::Cpu> c = et::matmul(a, b);
    CHECK(c.shape() == et::Shape<2>{d.m, d.n});
    test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a), test::host_matrices(b)),
                        tolerance);
  }
  SECTION("batch @ batch, batches of 1 and 5") {
    const std::int64_t batch = GENERATE(1, 5);
    const auto a = et::from_vector(et::cpu, values(batch * d.m * d.k, 3), {batch, d.m, d.k});
    const auto b = et::from_vector(et::cpu, values(batch * d.k * d.n, 4), {batch, d.k, d.n});
    const auto c = et::eval(et::matmul(a, b));
    CHECK(c.shape() == et::Shape<3>{batch, d.m, d.n});
    test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a), test::host_matrices(b)),
                        tolerance);
  }
  SECTION("batch @ matrix and matrix @ batch share the matrix; a batch of 1 broadcasts") {
    const auto a3 = et::from_vector(et::cpu, values(5 * d.m * d.k, 5), {5, d.m, d.k});
    const auto b2 = et::from_vector(et::cpu, values(d.k * d.n, 6), {d.k, d.n});
    const auto a2 = et::from_vector(et::cpu, values(d.m * d.k, 7), {d.m, d.k});
    const auto b3 = et::from_vector(et::cpu, values(5 * d.k * d.n, 8), {5, d.k, d.n});
    const auto b1 = et::from_vector(et::cpu, values(d.k * d.n, 9), {1, d.k, d.n});
    test::check_product(et::eval(et::matmul(a3, b2)).to_vector(),
                        test::reference_product(test::host_matrices(a3), test::host_matrices(b2)), tolerance);
    test::check_product(et::eval(et::matmul(a2, b3)).to_vector(),
                        test::reference_product(test::host_matrices(a2), test::host_matrices(b3)), tolerance);
    const auto c = et::eval(et::matmul(a3, b1));
    CHECK(c.shape() == et::Shape<3>{5, d.m, d.n});
    test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a3), test::host_matrices(b1)),
                        tolerance);
  }
}

TEST_CASE("random shapes and layouts match a double-precision product", "[matmul]") {
  std::mt19937_64 engine(2026);
  std::uniform_int_distribution<std::int64_t> extent(1, 48), batches(1, 4);
  const Layout layouts[] = {Layout::contiguous, Layout::transposed, Layout::row_slice, Layout::stepped,
                            Layout::batch_inner};
  std::uniform_int_distribution<int> pick(0, 4);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t batch = batches(engine), m = extent(engine), k = extent(engine), n = extent(engine);
    const Layout la = layouts[pick(engine)], lb = layouts[pick(engine)];
    CAPTURE(trial, batch, m, k, n, test::layout_name(la), test::layout_name(lb));
    const auto a = test::laid_out(test::uniform<float>(std::size_t(batch * m * k), 100 + trial),
                                  std::array<std::int64_t, 3>{batch, m, k}, la);
    const auto b = test::laid_out(test::uniform<float>(std::size_t(k * n), 200 + trial),
                                  std::array<std::int64_t, 2>{k, n},
                                  lb == Layout::batch_inner ? Layout::row_slice : lb);
    const auto copies = counters().operand_copies.load();
    const auto c = et::eval(et::matmul(a, b));
    CHECK(counters().operand_copies.load() - copies == test::needs_copy(la, m, k) + test::needs_copy(lb, k, n));
    test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a), test::host_matrices(b)), 1e-5);
  }
}

TEST_CASE("transposed and sliced operands and destinations are used in place", "[matmul][layout]") {
  const std::int64_t m = 19, k = 23, n = 11;
  const auto av = test::uniform<float>(m * k, 11), bv = test::uniform<float>(k * n, 12);
  const auto reference = test::reference_product(test::host_matrices(et::from_vector(et::cpu, av, {m, k})),
                                                 test::host_matrices(et::from_vector(et::cpu, bv, {k, n})));
  const auto a = test::laid_out(av, std::array<std::int64_t, 2>{m, k}, Layout::transposed);
  const auto b = test::laid_out(bv, std::array<std::int64_t, 2>{k, n}, Layout::row_slice);
  CHECK(a.strides() == et::Shape<2>{1, m});
  CHECK(b.strides() == et::Shape<2>{n + 5, 1});

  SECTION("into a new tensor: one GEMM, no copy") {
    const auto copies = counters().operand_copies.load();
    const auto gemms = counters().cpu_gemms.load(), by_library = counters().library_gemms.load();
    const auto c = et::eval(et::matmul(a, b));
    CHECK(counters().operand_copies.load() == copies);
    CHECK(counters().cpu_gemms.load() == gemms + 1);
    // The configured library ran it (cmake/EtensorCpu.cmake): oneDNN or the CBLAS where there is one.
#if defined(ET_WITH_DNNL) || defined(ET_WITH_CBLAS)
    CHECK(counters().library_gemms.load() == by_library + 1);
#else
    CHECK(counters().library_gemms.load() == by_library);
#endif
    test::check_product(c.to_vector(), reference, 1e-5);
  }
  SECTION("into an existing tensor, a transposed view of one and a slice of one") {
    auto c = et::zeros<float>(et::cpu, {m, n});
    const auto storage = c.storage();
    c = et::matmul(a, b);
    CHECK(c.storage() == storage);  // written in place
    test::check_product(c.to_vector(), reference, 1e-5);

    auto transposed = et::full<float>(et::cpu, {n, m}, 7.0f);
    transposed.transpose(0, 1) = et::matmul(a, b);  // a column-major destination
    test::check_product(transposed.transpose(0, 1).contiguous().to_vector(), reference, 1e-5);

    auto wide = et::full<float>(et::cpu, {m, n + 4}, 7.0f);
    wide.slice(1, 1, 1 + n) = et::matmul(a, b);
    test::check_product(wide.slice(1, 1, 1 + n).contiguous().to_vector(), reference, 1e-5);
    CHECK(et::sum(wide.slice(1, 0, 1)).item() == 7.0f * m);  // the columns around it untouched
    CHECK(et::sum(wide.slice(1, n + 1, n + 4)).item() == 7.0f * m * 3);
  }
  SECTION("an expand()ed batch is read with batch stride 0; an expanded matrix is copied") {
    const auto batch_of_b = et::from_vector(et::cpu, bv, {1, k, n}).expand({4, k, n});
    const auto copies = counters().operand_copies.load();
    const auto c = et::eval(et::matmul(et::from_vector(et::cpu, av, {m, k}), batch_of_b));
    CHECK(counters().operand_copies.load() == copies);
    for (std::int64_t i = 0; i < 4; ++i) test::check_product(c.select(0, i).contiguous().to_vector(), reference, 1e-5);
    const auto row = et::from_vector(et::cpu, test::uniform<float>(n, 13), {1, n});
    const auto rows = row.expand({k, n});  // every row the same: row stride 0
    const auto d = et::eval(et::matmul(et::from_vector(et::cpu, av, {m, k}), rows));
    CHECK(counters().operand_copies.load() == copies + 1);
    test::check_product(d.to_vector(),
                        test::reference_product(test::host_matrices(et::from_vector(et::cpu, av, {m, k})),
                                                test::host_matrices(rows.contiguous())),
                        1e-5);
  }
}

namespace {

/// What a column-major BLAS computes for a ColumnMajorGemm, read off its definition:
/// D = op(A) op(B) (+ bias[i] along D's rows), element (i, j) of a stored matrix at
/// i + j * ld. Checks cuBLAS's parameter rules on the way. float data.
void column_major_blas(const et::detail::ColumnMajorGemm& g, const std::vector<float>& bias) {
  using Operand = et::detail::ColumnMajorGemm::Operand;
  REQUIRE(g.a.ld >= std::max<std::int64_t>(1, g.a.rows));
  REQUIRE(g.b.ld >= std::max<std::int64_t>(1, g.b.rows));
  REQUIRE(g.ldd >= std::max<std::int64_t>(1, g.m));
  REQUIRE((g.a.transpose ? g.a.cols : g.a.rows) == g.m);  // op(A) is m x k
  REQUIRE((g.a.transpose ? g.a.rows : g.a.cols) == g.k);
  REQUIRE((g.b.transpose ? g.b.cols : g.b.rows) == g.k);  // op(B) is k x n
  REQUIRE((g.b.transpose ? g.b.rows : g.b.cols) == g.n);
  auto op = [](const Operand& x, std::int64_t batch, std::int64_t i, std::int64_t j) {
    const float* base = static_cast<const float*>(x.data) + batch * x.batch_stride;
    return double(x.transpose ? base[j + i * x.ld] : base[i + j * x.ld]);
  };
  for (std::int64_t batch = 0; batch < g.batch; ++batch)
    for (std::int64_t j = 0; j < g.n; ++j)
      for (std::int64_t i = 0; i < g.m; ++i) {
        double sum = bias.empty() ? 0.0 : double(bias[static_cast<std::size_t>(i)]);
        for (std::int64_t l = 0; l < g.k; ++l) sum += op(g.a, batch, i, l) * op(g.b, batch, l, j);
        static_cast<float*>(g.d)[batch * g.batch_stride_d + i + j * g.ldd] = static_cast<float>(sum);
      }
}

}  // namespace

TEST_CASE("the column-major BLAS call that cuBLAS gets computes the row-major product", "[matmul][layout]") {
  // The translation of backend/cuda/cublas.hpp (transpose flags, leading dimensions, batch
  // strides, the operand swap, batch folding, the bias direction), run here through a
  // column-major GEMM written from BLAS's definition, so it is checked without a GPU.
  std::mt19937_64 engine(99);
  std::uniform_int_distribution<std::int64_t> extent(1, 9), batches(1, 3);
  const Layout operand_layouts[] = {Layout::contiguous, Layout::transposed, Layout::row_slice, Layout::batch_inner};
  const Layout result_layouts[] = {Layout::contiguous, Layout::transposed, Layout::row_slice};
  std::uniform_int_distribution<int> pick_operand(0, 3), pick_result(0, 2);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t batch = batches(engine), m = extent(engine), k = extent(engine), n = extent(engine);
    const Layout la = operand_layouts[pick_operand(engine)], lb = operand_layouts[pick_operand(engine)],
                 lc = result_layouts[pick_result(engine)];
    const bool shared_b = trial % 3 == 0, with_bias = trial % 2 == 0;
    CAPTURE(trial, batch, m, k, n, test::layout_name(la), test::layout_name(lb), test::layout_name(lc), shared_b);
    const auto a = test::laid_out(test::uniform<float>(std::size_t(batch * m * k), trial),
                                  std::array<std::int64_t, 3>{batch, m, k}, la);
    const std::int64_t batch_b = shared_b ? 1 : batch;
    const auto b = test::laid_out(test::uniform<float>(std::size_t(batch_b * k * n), 1000 + trial),
                                  std::array<std::int64_t, 3>{batch_b, k, n}, lb);
    const auto bias = test::uniform<float>(std::size_t(n), 2000 + trial);
    const auto out = test::laid_out(std::vector<float>(std::size_t(batch * m * n)),
                                    std::array<std::int64_t, 3>{batch, m, n}, lc);
    const et::detail::GemmProblem problem = et::detail::gemm_problem(a, b, out);
    const et::detail::ColumnMajorGemm call = et::detail::column_major(problem);
    if (with_bias && !call.rows_are_result_columns) continue;  // no bias epilogue on a column-major result
    column_major_blas(call, with_bias ? bias : std::vector<float>{});
    std::vector<double> bias_values(bias.begin(), bias.end());
    auto identity = [](double v) { return v; };
    test::check_product(out.to_vector(),
                        test::apply(test::reference_product(test::host_matrices(a), test::host_matrices(b)),
                                    with_bias ? bias_values : std::vector<double>{}, identity),
                        1e-5);
  }
}

TEMPLATE_TEST_CASE("bias and activation patterns compute their unfused meaning", "[matmul][epilogue]", float,
                   et::bfloat16) {
  using T = TestType;
  const std::int64_t m = 13, k = 37, n = 21;
  const auto x = et::from_vector(et::cpu, test::uniform<T>(m * k, 21), {m, k});
  const auto w = et::from_vector(et::cpu, test::uniform<T>(n * k, 22), {n, k});  // [out, in], as nn.Linear
  const auto bias = et::from_vector(et::cpu, test::uniform<T>(n, 23), {n});
  const auto wt = w.transpose(0, 1);
  const auto product = test::reference_product(test::host_matrices(x), test::host_matrices(wt.contiguous()));
  std::vector<double> bias_values;
  for (const T& v : bias.to_vector()) bias_values.push_back(test::as_double(v));
  // The product is rounded to T before the rest runs on the CPU: allow that rounding too.
  const double tolerance = 2 * test::product_tolerance<T>();
  auto identity = [](double v) { return v; };

  test::check_product(et::eval(et::matmul(x, wt) + bias).to_vector(), test::apply(product, bias_values, identity),
                      tolerance);
  test::check_product(et::eval(bias + et::matmul(x, wt)).to_vector(), test::apply(product, bias_values, identity),
                      tolerance);
  test::check_product(et::eval(et::relu(et::matmul(x, wt) + bias)).to_vector(),
                      test::apply(product, bias_values, test::relu), tolerance);
  test::check_product(et::eval(et::relu(et::matmul(x, wt))).to_vector(), test::apply(product, {}, test::relu),
                      tolerance);
  test::check_product(et::eval(et::gelu_tanh(et::matmul(x, wt) + bias)).to_vector(),
                      test::apply(product, bias_values, test::gelu_tanh), tolerance);
  test::check_product(et::eval(et::gelu(et::matmul(x, wt) + bias)).to_vector(),
                      test::apply(product, bias_values, test::gelu_erf), tolerance);
  test::Product doubled = product;
  for (auto& v : doubled.value) v *= 2;
  for (auto& s : doubled.scale) s *= 2;
  test::check_product(et::eval(et::matmul(x, wt) * 2.0f + bias).to_vector(),
                      test::apply(doubled, bias_values, identity), tolerance);
}

TEST_CASE("expressions around products: the GEMM goes into the destination when nothing reads it",
          "[matmul][lowering]") {
  const std::int64_t m = 9, k = 14, n = 6;
  const auto a = et::from_vector(et::cpu, test::uniform<float>(m * k, 31), {m, k});
  const auto b = et::from_vector(et::cpu, test::uniform<float>(k * n, 32), {k, n});
  const auto product = test::reference_product(test::host_matrices(a), test::host_matrices(b));
  auto times = [&](double factor, double offset) {
    test::Product p = product;
    for (auto& v : p.value) v = v * factor + offset;
    for (auto& s : p.scale) s = s * std::fabs(factor) + std::fabs(offset);
    return p;
  };

  SECTION("matmul(x, w) * 2 + 1 into an existing tensor") {
    auto z = et::zeros<float>(et::cpu, {m, n});
    z = et::matmul(a, b) * 2.0f + 1.0f;
    test::check_product(z.to_vector(), times(2, 1), 1e-5);
  }
  SECTION("z += matmul(a, b) reads z, so the product goes to a temporary") {
    auto z = et::full<float>(et::cpu, {m, n}, 0.5f);
    z += et::matmul(a, b);
    test::check_product(z.to_vector(), times(1, 0.5), 1e-5);
  }
  SECTION("y = matmul(y, w) reads its destination") {
    auto y = et::from_vector(et::cpu, test::uniform<float>(n * n, 33), {n, n});
    const auto w = et::from_vector(et::cpu, test::uniform<float>(n * n, 34), {n, n});
    const auto want = test::reference_product(test::host_matrices(y.clone()), test::host_matrices(w));
    y = et::matmul(y, w);
    test::check_product(y.to_vector(), want, 1e-5);
  }
  SECTION("operands that are expressions, and products of products") {
    const auto c = et::from_vector(et::cpu, test::uniform<float>(n * 4, 35), {n, 4});
    const auto ab = et::eval(et::matmul(a, b));
    const auto want = test::reference_product(test::host_matrices(ab), test::host_matrices(c));
    test::check_product(et::eval(et::matmul(et::matmul(a, b), c)).to_vector(), want, 1e-5);
    const auto doubled = test::reference_product(test::host_matrices(et::eval(a * 2.0f)), test::host_matrices(b));
    test::check_product(et::eval(et::matmul(a * 2.0f, b)).to_vector(), doubled, 1e-5);
    test::check_product(et::eval(et::matmul(a, b) + et::matmul(a, b)).to_vector(), times(2, 0), 1e-5);
  }
  SECTION("a product broadcast into a larger destination, and into another element type") {
    auto z = et::zeros<float>(et::cpu, {3, m, n});
    z = et::matmul(a, b);
    for (std::int64_t i = 0; i < 3; ++i) test::check_product(z.select(0, i).contiguous().to_vector(), product, 1e-5);
    auto h = et::zeros<et::half>(et::cpu, {m, n});
    h = et::matmul(a, b);
    test::check_product(h.to_vector(), product, 2e-3);
  }
  SECTION("an empty inner dimension gives zeros (plus the bias)") {
    const auto e1 = et::zeros<float>(et::cpu, {m, 0});
    const auto e2 = et::zeros<float>(et::cpu, {0, n});
    const auto zero = et::eval(et::matmul(e1, e2));
    CHECK(zero.shape() == et::Shape<2>{m, n});
    CHECK(et::sum(et::abs(zero)).item() == 0.0f);
    const auto bias = et::from_vector(et::cpu, test::uniform<float>(n, 36), {n});
    const auto biased = et::eval(et::relu(et::matmul(e1, e2) + bias));
    CHECK(et::max(et::abs(biased - et::relu(bias))).item() == 0.0f);
    CHECK(et::eval(et::matmul(et::zeros<float>(et::cpu, {0, k}), b)).numel() == 0);
  }
}

TEST_CASE("matmul shape errors name both shapes", "[matmul][errors]") {
  const auto a = et::zeros<float>(et::cpu, {2, 3});
  const auto b = et::zeros<float>(et::cpu, {4, 5});
  CHECK_THROWS_MATCHES(et::matmul(a, b), et::ShapeError,
                       Catch::Matchers::Message("et: matmul of shapes [2, 3] and [4, 5]: the inner dimensions differ "
                                                "(3 columns on the left, 4 rows on the right)"));
  const auto x = et::zeros<float>(et::cpu, {5, 2, 3});
  const auto y = et::zeros<float>(et::cpu, {4, 3, 6});
  CHECK_THROWS_MATCHES(et::matmul(x, y), et::ShapeError,
                       Catch::Matchers::Message("et: matmul of shapes [5, 2, 3] and [4, 3, 6]: "
                                                "the batch dimensions 5 and 4 do not broadcast"));
  CHECK_THROWS_AS(et::matmul(x, b), et::ShapeError);
  CHECK_THROWS_WITH(et::matmul(et::Tensor<float, 2, et::Cpu>{}, b), Contains("undefined"));
}

TEST_CASE("the math mode is per thread, scoped by a guard, and captured when the product is built",
          "[matmul][math-mode]") {
  const auto a = et::zeros<float>(et::cpu, {2, 2});
  CHECK(et::math_mode() == et::MathMode::exact);
  const auto exact = et::matmul(a, a);
  {
    const et::MathModeGuard tf32(et::MathMode::tf32);
    CHECK(et::math_mode() == et::MathMode::tf32);
    {
      const et::MathModeGuard bf16(et::MathMode::bf16);
      CHECK(et::math_mode() == et::MathMode::bf16);
      CHECK(et::matmul(a, a).math_mode() == et::MathMode::bf16);
    }
    CHECK(et::math_mode() == et::MathMode::tf32);
    CHECK(et::matmul(a, a).math_mode() == et::MathMode::tf32);
    CHECK(et::matmul(a, a, et::MathMode::f16).math_mode() == et::MathMode::f16);
  }
  CHECK(et::math_mode() == et::MathMode::exact);
  CHECK(exact.math_mode() == et::MathMode::exact);
  static_assert(std::is_same_v<decltype(et::eval(et::matmul(et::zeros<float>(et::cpu, {5, 2, 3}), a))),
                               et::Tensor<float, 3, et::Cpu>>);
}
