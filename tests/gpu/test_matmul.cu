// Matrix products on a CUDA device (cuBLASLt) against a double-precision triple loop:
// every element type and math mode, odd and degenerate shapes, batches with broadcasting,
// operands in every layout (in place or copied, counted), the fused epilogues and their
// fallbacks (calls counted by etensor, kernels by CUPTI), and the error messages.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <algorithm>
#include <random>
#include <string>

#include "../common/matmul_reference.hpp"
#include "cupti_counter.hpp"

using Catch::Matchers::Contains;
using test::Layout;

namespace {

using Gpu = et::Cuda<0>;

struct Dims {
  std::int64_t m, k, n;
};

et::detail::GemmCounters& counters() { return et::detail::gemm_counters(); }

/// What etensor's counters saw during f: cublasLtMatmul calls, of which fused, and copies.
struct Calls {
  std::int64_t lt = 0, fused = 0, cublas = 0, copies = 0;
};
template <class F>
Calls count_calls(F&& f) {
  const Calls before{counters().lt_matmuls.load(), counters().fused_epilogues.load(), counters().cublas_gemms.load(),
                     counters().operand_copies.load()};
  f();
  return {counters().lt_matmuls.load() - before.lt, counters().fused_epilogues.load() - before.fused,
          counters().cublas_gemms.load() - before.cublas, counters().operand_copies.load() - before.copies};
}

/// A GPU tensor with the values and layout test::laid_out gives on the CPU.
template <class T, std::size_t R>
et::Tensor<T, int(R), Gpu> gpu_operand(const std::vector<T>& values, const std::array<std::int64_t, R>& shape,
                                       Layout layout = Layout::contiguous) {
  return test::laid_out(values, shape, layout).to(et::cuda<0>);
}

/// Kernels of etensor's own (elementwise, reductions) among those CUPTI saw.
std::size_t etensor_kernels(const test::Launches& seen) {
  const auto& names = seen.kernel_names;
  return static_cast<std::size_t>(std::count_if(
      names.begin(), names.end(), [](const auto& name) { return name.find("2et7kernels") != std::string::npos; }));
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA matmul matches a double-precision product", "[matmul]", float, double, et::half,
                   et::bfloat16) {
  using T = TestType;
  const Dims d = GENERATE(Dims{1, 1, 1}, Dims{17, 33, 9}, Dims{64, 64, 64}, Dims{3, 130, 5}, Dims{1, 300, 2},
                          Dims{40, 1, 33}, Dims{128, 96, 160});
  CAPTURE(d.m, d.k, d.n);
  const double tolerance = test::product_tolerance<T>();
  auto values = [](std::int64_t count, std::uint64_t seed) {
    return test::uniform<T>(static_cast<std::size_t>(count), seed);
  };
  SECTION("matrix @ matrix") {
    const auto a = gpu_operand(values(d.m * d.k, 1), std::array<std::int64_t, 2>{d.m, d.k});
    const auto b = gpu_operand(values(d.k * d.n, 2), std::array<std::int64_t, 2>{d.k, d.n});
    const et::Tensor<T, 2, Gpu> c = et::matmul(a, b);
    test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a), test::host_matrices(b)),
                        tolerance);
  }
  SECTION("batch @ batch, batches of 1 and 5") {
    const std::int64_t batch = GENERATE(1, 5);
    const auto a = gpu_operand(values(batch * d.m * d.k, 3), std::array<std::int64_t, 3>{batch, d.m, d.k});
    const auto b = gpu_operand(values(batch * d.k * d.n, 4), std::array<std::int64_t, 3>{batch, d.k, d.n});
    test::check_product(et::eval(et::matmul(a, b)).to_vector(),
                        test::reference_product(test::host_matrices(a), test::host_matrices(b)), tolerance);
  }
  SECTION("batch @ matrix, matrix @ batch, and a batch of 1 broadcast") {
    const auto a3 = gpu_operand(values(5 * d.m * d.k, 5), std::array<std::int64_t, 3>{5, d.m, d.k});
    const auto b2 = gpu_operand(values(d.k * d.n, 6), std::array<std::int64_t, 2>{d.k, d.n});
    const auto a2 = gpu_operand(values(d.m * d.k, 7), std::array<std::int64_t, 2>{d.m, d.k});
    const auto b3 = gpu_operand(values(5 * d.k * d.n, 8), std::array<std::int64_t, 3>{5, d.k, d.n});
    const auto b1 = gpu_operand(values(d.k * d.n, 9), std::array<std::int64_t, 3>{1, d.k, d.n});
    test::check_product(et::eval(et::matmul(a3, b2)).to_vector(),
                        test::reference_product(test::host_matrices(a3), test::host_matrices(b2)), tolerance);
    test::check_product(et::eval(et::matmul(a2, b3)).to_vector(),
                        test::reference_product(test::host_matrices(a2), test::host_matrices(b3)), tolerance);
    test::check_product(et::eval(et::matmul(a3, b1)).to_vector(),
                        test::reference_product(test::host_matrices(a3), test::host_matrices(b1)), tolerance);
  }
}

TEST_CASE("CUDA matmul: random shapes and layouts, copies only where no BLAS layout fits", "[matmul]") {
  std::mt19937_64 engine(2027);
  std::uniform_int_distribution<std::int64_t> extent(1, 72), batches(1, 4);
  const Layout layouts[] = {Layout::contiguous, Layout::transposed, Layout::row_slice, Layout::stepped,
                            Layout::batch_inner};
  std::uniform_int_distribution<int> pick(0, 4);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t batch = batches(engine), m = extent(engine), k = extent(engine), n = extent(engine);
    const Layout la = layouts[pick(engine)], lb = layouts[pick(engine)];
    const bool b_batched = trial % 2 == 0;
    CAPTURE(trial, batch, m, k, n, test::layout_name(la), test::layout_name(lb), b_batched);
    const auto a = gpu_operand(test::uniform<float>(std::size_t(batch * m * k), 300 + trial),
                               std::array<std::int64_t, 3>{batch, m, k}, la);
    const auto values_b = test::uniform<float>(std::size_t(batch * k * n), 400 + trial);
    auto check = [&](const auto& b) {
      et::Tensor<float, 3, Gpu> c;
      const Calls calls = count_calls([&] { c = et::matmul(a, b); });
      CHECK(calls.copies == test::needs_copy(la, m, k) + test::needs_copy(lb, k, n));
      CHECK(calls.lt + calls.cublas == 1);
      test::check_product(c.to_vector(), test::reference_product(test::host_matrices(a), test::host_matrices(b)),
                          1e-5);
    };
    if (b_batched) {
      check(gpu_operand(values_b, std::array<std::int64_t, 3>{batch, k, n}, lb));
    } else {
      const std::vector<float> first(values_b.begin(), values_b.begin() + k * n);
      check(gpu_operand(first, std::array<std::int64_t, 2>{k, n}, lb == Layout::batch_inner ? Layout::row_slice : lb));
    }
  }
}

TEST_CASE("CUDA matmul math modes: exact is float32, the others within their precision", "[matmul][math-mode]") {
  const std::int64_t m = 96, k = 1024, n = 80;
  const auto a = gpu_operand(test::uniform<float>(m * k, 41), std::array<std::int64_t, 2>{m, k});
  const auto b = gpu_operand(test::uniform<float>(k * n, 42), std::array<std::int64_t, 2>{k, n});
  const auto want = test::reference_product(test::host_matrices(a), test::host_matrices(b));
  auto worst = [&](const et::Tensor<float, 2, Gpu>& c) {
    const auto got = c.to_vector();
    double error = 0;
    for (std::size_t e = 0; e < got.size(); ++e)
      error = std::max(error, std::fabs(got[e] - want.value[e]) / want.scale[e]);
    return error;
  };
  const double exact = worst(et::eval(et::matmul(a, b)));  // the default mode
  CHECK(exact <= 1e-6);
  double tf32 = 0;
  {
    const et::MathModeGuard guard(et::MathMode::tf32);
    tf32 = worst(et::eval(et::matmul(a, b)));
  }
  CHECK(tf32 <= 2e-3);
  const double bf16 = worst(et::eval(et::matmul(a, b, et::MathMode::bf16)));
  CHECK(bf16 <= 1e-2);
  const double f16 = worst(et::eval(et::matmul(a, b, et::MathMode::f16)));
  CHECK(f16 <= 2e-3);
  // For the record (not a requirement: the modes permit, cuBLASLt chooses): largest error
  // on the sum_k |a b| scale per mode; tf32, bf16 and f16 above exact show tensor cores ran.
  WARN("math modes, largest error / sum|ab|: exact " << exact << ", tf32 " << tf32 << ", bf16 " << bf16 << ", f16 "
                                                    << f16);
}

TEST_CASE("CUDA matmul reads transposed, sliced and expanded operands in place", "[matmul][layout]") {
  const std::int64_t m = 37, k = 29, n = 21;
  const auto av = test::uniform<float>(m * k, 51), bv = test::uniform<float>(k * n, 52);
  const auto reference = test::reference_product(test::host_matrices(et::from_vector(et::cpu, av, {m, k})),
                                                 test::host_matrices(et::from_vector(et::cpu, bv, {k, n})));
  const auto a = gpu_operand(av, std::array<std::int64_t, 2>{m, k}, Layout::transposed);
  const auto b = gpu_operand(bv, std::array<std::int64_t, 2>{k, n}, Layout::row_slice);

  auto c = et::zeros<float>(et::cuda<0>, {m, n});
  const auto storage = c.storage();
  Calls calls = count_calls([&] { c = et::matmul(a, b); });
  CHECK(c.storage() == storage);
  CHECK(calls.copies == 0);
  CHECK(calls.lt == 1);
  test::check_product(c.to_vector(), reference, 1e-5);

  auto transposed = et::full<float>(et::cuda<0>, {n, m}, 7.0f);
  calls = count_calls([&] { transposed.transpose(0, 1) = et::matmul(a, b); });  // a column-major result
  CHECK(calls.lt == 1);
  test::check_product(transposed.transpose(0, 1).contiguous().to_vector(), reference, 1e-5);

  auto wide = et::full<float>(et::cuda<0>, {m, n + 4}, 7.0f);
  wide.slice(1, 1, 1 + n) = et::matmul(a, b);
  test::check_product(wide.slice(1, 1, 1 + n).contiguous().to_vector(), reference, 1e-5);
  CHECK(et::sum(wide.slice(1, 0, 1)).item() == 7.0f * m);
  CHECK(et::sum(wide.slice(1, n + 1, n + 4)).item() == 7.0f * m * 3);

  const auto batch_of_b = et::from_vector(et::cuda<0>, bv, {1, k, n}).expand({4, k, n});  // batch stride 0
  et::Tensor<float, 3, Gpu> batched;
  calls = count_calls([&] { batched = et::matmul(a, batch_of_b); });
  CHECK(calls.copies == 0);
  for (std::int64_t i = 0; i < 4; ++i)
    test::check_product(batched.select(0, i).contiguous().to_vector(), reference, 1e-5);
}

TEMPLATE_TEST_CASE("CUDA bias and activation patterns: one cuBLASLt call with an epilogue", "[matmul][epilogue]", float,
                   et::bfloat16) {
  using T = TestType;
  const std::int64_t m = 67, k = 96, n = 40;
  const auto x = gpu_operand(test::uniform<T>(m * k, 61), std::array<std::int64_t, 2>{m, k});
  const auto w = gpu_operand(test::uniform<T>(n * k, 62), std::array<std::int64_t, 2>{n, k});  // [out, in]
  const auto bias = gpu_operand(test::uniform<T>(n, 63), std::array<std::int64_t, 1>{n});
  const auto wt = w.transpose(0, 1);
  const auto product = test::reference_product(test::host_matrices(x), test::host_matrices(wt.contiguous()));
  std::vector<double> bias_values;
  for (const T& v : bias.to_vector()) bias_values.push_back(test::as_double(v));
  const double tolerance = 2 * test::product_tolerance<T>();
  auto identity = [](double v) { return v; };
  et::Tensor<T, 2, Gpu> y = et::empty<T>(et::cuda<0>, {m, n});

  auto fused = [&](const auto& expression, const test::Product& want, double allowed) {
    const Calls calls = count_calls([&] { y = expression; });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 1);
    test::check_product(y.to_vector(), want, allowed);
  };
  auto unfused = [&](const auto& expression, const test::Product& want) {
    const Calls calls = count_calls([&] { y = expression; });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 0);
    test::check_product(y.to_vector(), want, tolerance);
  };
  SECTION("bias, either side") {
    fused(et::matmul(x, wt) + bias, test::apply(product, bias_values, identity), tolerance);
    fused(bias + et::matmul(x, wt), test::apply(product, bias_values, identity), tolerance);
  }
  SECTION("relu, with and without bias") {
    fused(et::relu(et::matmul(x, wt) + bias), test::apply(product, bias_values, test::relu), tolerance);
    fused(et::relu(et::matmul(x, wt)), test::apply(product, {}, test::relu), tolerance);
  }
  SECTION("gelu_tanh fuses (cuBLASLt's GELU); the exact gelu does not") {
    const auto want_tanh = test::apply(product, bias_values, test::gelu_tanh);
    fused(et::gelu_tanh(et::matmul(x, wt) + bias), want_tanh, std::max(tolerance, 2e-3));
    // For the record: how far cuBLASLt's GELU is from either form (|difference| up to 4.7e-4 between them).
    const auto got = y.to_vector();
    const auto want_erf = test::apply(product, bias_values, test::gelu_erf);
    double from_tanh = 0, from_erf = 0;
    for (std::size_t e = 0; e < got.size(); ++e) {
      from_tanh = std::max(from_tanh, std::fabs(test::as_double(got[e]) - want_tanh.value[e]));
      from_erf = std::max(from_erf, std::fabs(test::as_double(got[e]) - want_erf.value[e]));
    }
    WARN("cuBLASLt GELU_BIAS epilogue, largest |difference| from the tanh form " << from_tanh << ", from the erf form "
                                                                                 << from_erf);
    fused(et::gelu_tanh(et::matmul(x, wt)), test::apply(product, {}, test::gelu_tanh), std::max(tolerance, 2e-3));
    unfused(et::gelu(et::matmul(x, wt) + bias), test::apply(product, bias_values, test::gelu_erf));
  }
  SECTION("other expressions fall back to the GEMM plus one elementwise kernel") {
    test::Product doubled = product;
    for (auto& v : doubled.value) v *= 2;
    for (auto& s : doubled.scale) s *= 2;
    unfused(et::matmul(x, wt) * 2.0f + bias, test::apply(doubled, bias_values, identity));
    unfused(et::relu(et::matmul(x, wt) + bias * 1.0f), test::apply(product, bias_values, test::relu));
  }
  SECTION("a batch of inputs: folded into one product, or a batch sharing the bias") {
    const std::int64_t batch = 3;
    const auto values = test::uniform<T>(batch * m * k, 64);
    const auto contiguous = gpu_operand(values, std::array<std::int64_t, 3>{batch, m, k});
    const auto interleaved = gpu_operand(values, std::array<std::int64_t, 3>{batch, m, k}, Layout::batch_inner);
    const auto unbiased =
        test::reference_product(test::host_matrices(contiguous), test::host_matrices(wt.contiguous()));
    const auto want = test::apply(unbiased, bias_values, test::relu);
    auto z = et::empty<T>(et::cuda<0>, {batch, m, n});
    Calls calls = count_calls([&] { z = et::relu(et::matmul(contiguous, wt) + bias); });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 1);
    test::check_product(z.to_vector(), want, tolerance);
    calls = count_calls([&] { z = et::relu(et::matmul(interleaved, wt) + bias); });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 1);  // the batched (unfolded) product fuses its bias epilogue too
    test::check_product(z.to_vector(), want, tolerance);
  }
}

TEST_CASE("CUDA expressions around products", "[matmul][lowering]") {
  const std::int64_t m = 33, k = 17, n = 12;
  const auto a = gpu_operand(test::uniform<float>(m * k, 71), std::array<std::int64_t, 2>{m, k});
  const auto b = gpu_operand(test::uniform<float>(k * n, 72), std::array<std::int64_t, 2>{k, n});
  const auto product = test::reference_product(test::host_matrices(a), test::host_matrices(b));
  auto affine = [&](double factor, double offset) {
    test::Product p = product;
    for (auto& v : p.value) v = v * factor + offset;
    for (auto& s : p.scale) s = s * std::fabs(factor) + std::fabs(offset);
    return p;
  };
  auto z = et::full<float>(et::cuda<0>, {m, n}, 0.5f);
  z += et::matmul(a, b);  // reads z: the product goes to a temporary
  test::check_product(z.to_vector(), affine(1, 0.5), 1e-5);
  z = et::matmul(a, b) * 2.0f + 1.0f;
  test::check_product(z.to_vector(), affine(2, 1), 1e-5);
  test::check_product(et::eval(et::matmul(a, b) + et::matmul(a, b)).to_vector(), affine(2, 0), 1e-5);

  auto y = gpu_operand(test::uniform<float>(n * n, 73), std::array<std::int64_t, 2>{n, n});
  const auto w = gpu_operand(test::uniform<float>(n * n, 74), std::array<std::int64_t, 2>{n, n});
  const auto want_y = test::reference_product(test::host_matrices(y.clone()), test::host_matrices(w));
  y = et::matmul(y, w);
  test::check_product(y.to_vector(), want_y, 1e-5);

  const auto c = gpu_operand(test::uniform<float>(n * 5, 75), std::array<std::int64_t, 2>{n, 5});
  const auto ab = et::eval(et::matmul(a, b));
  test::check_product(et::eval(et::matmul(et::matmul(a, b), c)).to_vector(),
                      test::reference_product(test::host_matrices(ab), test::host_matrices(c)), 1e-5);
  test::check_product(et::eval(et::matmul(a * 2.0f, b)).to_vector(), affine(2, 0), 1e-5);

  auto broadcast = et::zeros<float>(et::cuda<0>, {3, m, n});
  broadcast = et::matmul(a, b);
  for (std::int64_t i = 0; i < 3; ++i)
    test::check_product(broadcast.select(0, i).contiguous().to_vector(), product, 1e-5);

  const auto empty_a = et::zeros<float>(et::cuda<0>, {m, 0});
  const auto empty_b = et::zeros<float>(et::cuda<0>, {0, n});
  CHECK(et::sum(et::abs(et::eval(et::matmul(empty_a, empty_b)))).item() == 0.0f);
}

TEST_CASE("CUDA products run as one cuBLASLt call and no copy or etensor kernel, counted by CUPTI",
          "[matmul][cupti]") {
  const std::int64_t m = 256, k = 192, n = 128;
  const auto a = gpu_operand(test::uniform<float>(m * k, 81), std::array<std::int64_t, 2>{m, k}, Layout::transposed);
  const auto b = gpu_operand(test::uniform<float>(k * n, 82), std::array<std::int64_t, 2>{k, n});
  const auto w = gpu_operand(test::uniform<float>(n * k, 83), std::array<std::int64_t, 2>{n, k});
  const auto bias = gpu_operand(test::uniform<float>(n, 84), std::array<std::int64_t, 1>{n});
  auto z = et::empty<float>(et::cuda<0>, {m, n});
  auto run_counted = [&](const char* what, auto&& assignment) {
    assignment();  // warm-up: handles, workspace and the heuristic's answer are set up once
    Calls calls;
    test::LaunchCounter counter;
    calls = count_calls(assignment);
    const test::Launches seen = counter.stop();
    CAPTURE(what, seen.kernel_names);
    CHECK(seen.memcpys == 0);
    CHECK(seen.kernels() >= 1);
    return std::make_pair(calls, etensor_kernels(seen));
  };
  SECTION("a transposed operand is a transpose flag") {
    const auto [calls, ours] = run_counted("z = matmul(a^T view, b)", [&] { z = et::matmul(a, b); });
    CHECK(calls.lt == 1);
    CHECK(calls.copies == 0);
    CHECK(ours == 0);
  }
  SECTION("relu(matmul(x, w^T) + bias) is one call with the RELU_BIAS epilogue") {
    const auto [calls, ours] =
        run_counted("relu(matmul + bias)", [&] { z = et::relu(et::matmul(a, w.transpose(0, 1)) + bias); });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 1);
    CHECK(ours == 0);
  }
  SECTION("an expression no epilogue maps is the GEMM plus one elementwise kernel") {
    const auto [calls, ours] =
        run_counted("matmul * 2 + bias", [&] { z = et::matmul(a, w.transpose(0, 1)) * 2.0f + bias; });
    CHECK(calls.lt == 1);
    CHECK(calls.fused == 0);
    CHECK(ours == 1);
  }
}

TEST_CASE("CUDA matmul errors: shapes name both, cuBLAS failures name the status", "[matmul][cuda-error]") {
  const auto a = et::zeros<float>(et::cuda<0>, {2, 3});
  const auto b = et::zeros<float>(et::cuda<0>, {4, 5});
  CHECK_THROWS_MATCHES(et::matmul(a, b), et::ShapeError,
                       Catch::Matchers::Message("et: matmul of shapes [2, 3] and [4, 5]: the inner dimensions differ "
                                                "(3 columns on the left, 4 rows on the right)"));
  CHECK_THROWS_WITH([] { ET_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED); }(),
                    Contains("et: cuBLAS call CUBLAS_STATUS_NOT_SUPPORTED failed: CUBLAS_STATUS_NOT_SUPPORTED"));
  // A leading dimension below the row length: cuBLAS refuses the call.
  const auto x = et::zeros<float>(et::cuda<0>, {8, 8});
  et::detail::GemmProblem problem;
  problem.m = problem.n = problem.k = 8;
  problem.a = {x.data(), {true, 2}, 0};
  problem.b = {x.data(), {true, 8}, 0};
  const auto out = et::empty<float>(et::cuda<0>, {8, 8});
  problem.c = {out.data(), {true, 8}, 0};
  auto refused = [&] {
    const et::detail::EpilogueBuffers<float> no_buffers;
    (void)gemm(et::detail::backend<et::Cuda<0>>, problem, et::MathMode::exact, et::detail::GemmEpilogue::none,
               no_buffers);
  };
  CHECK_THROWS_AS(refused(), et::Error);
  CHECK_THROWS_WITH(refused(), Contains("CUBLAS_STATUS_"));
  // The process goes on.
  const auto ones = et::ones<float>(et::cuda<0>, {3, 4});
  CHECK(et::sum(et::eval(et::matmul(ones, ones.transpose(0, 1)))).item() == 36.0f);
}

TEST_CASE("cuBLAS handles and the workspace exist once per device and stream", "[matmul]") {
  et::detail::DeviceGuard guard(0);
  auto& first = et::detail::cuda_backend::blas_context(0, et::detail::current_stream_handle(0));
  auto& again = et::detail::cuda_backend::blas_context(0, et::detail::current_stream_handle(0));
  CHECK(&first == &again);
  CHECK(first.lt != nullptr);
  CHECK(first.workspace != nullptr);
  CHECK(first.workspace_bytes == et::detail::cuda_backend::gemm_workspace_bytes);
}
