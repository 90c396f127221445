// Fused elementwise expressions over arrays of more than 2^31 elements (about 40 GiB of
// GPU memory; tagged [large], so that a smaller GPU excludes them by name and reports them
// as not run): the linear kernel's 64-bit indices, and the strided kernel's 32-bit boxes
// (include/et/backend/cuda/elementwise.hpp).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "../common/sharing_cases.hpp"
#include "elementwise_helpers.hpp"

TEST_CASE("tensors of more than 2^31 elements: 64-bit linear indices, 32-bit strided boxes", "[elementwise][large]") {
  constexpr std::size_t needed = std::size_t{40} << 30;
  const et::MemoryInfo memory = et::memory_info(et::cuda<0>);
  // Run where it fits (the lent H100s and H200s); elsewhere exclude [large] by name, so
  // that the test is reported as not run instead of passing without running.
  INFO("the >2^31-element tests want 40 GiB free on cuda:0, and " << (memory.free >> 20) << " MiB are free");
  REQUIRE(memory.free >= needed);
  constexpr std::int64_t two_31 = std::int64_t{1} << 31;

  SECTION("x = x * 2 + 1 over 2^31 + 17 floats (linear path)") {
    const std::int64_t n = two_31 + 17;
    const std::uint64_t seed = 77;
    auto x = et::rand<float>(et::cuda<0>, {n}, seed);
    x = x * 2 + 1;
    // The generator gives element i from (seed, i) alone, so any index can be recomputed
    // on the host; 2 * u is exact and + 1 rounds the same way on both sides.
    const et::detail::UniformGenerator<float> uniform{seed};
    for (const std::int64_t i : {std::int64_t{0}, std::int64_t{1}, n / 2, two_31 - 1, two_31, two_31 + 1, n - 2, n - 1}) {
      CAPTURE(i);
      const float got = view(x, i, {1}, {1}).item();
      CHECK(got == uniform(i) * 2.0f + 1.0f);
    }
  }
  SECTION("a broadcast [65537, 1] + [1, 32769] result (strided path, 64-bit)") {
    const std::int64_t rows = 65537, cols = 32769;  // 2^31 + 98305 elements
    REQUIRE(rows * cols > two_31);
    const auto column = random_sample<float>(et::Shape<2>{rows, 1}, 8000, -3, 3);
    const auto row = random_sample<float>(et::Shape<2>{1, cols}, 8001, -3, 3);
    const et::Tensor<float, 2, Gpu> z = column.gpu - row.gpu;
    const std::int64_t total = rows * cols;
    for (const std::int64_t i : {std::int64_t{0}, cols + 5, total / 2, two_31 - 1, two_31, two_31 + 1, total - 1}) {
      const std::int64_t r = i / cols, c = i % cols;
      CAPTURE(i, r, c);
      const float got = et::Tensor<float, 1, Gpu>(z.storage(), i, {1}, {1}).item();
      CHECK(got == column.host[static_cast<std::size_t>(r)] - row.host[static_cast<std::size_t>(c)]);
    }
  }

  // The strided kernel indexes with 32 bits; past them it runs once per box of the index
  // space (backend/cuda/elementwise.hpp), each box's operands read from its origin.
  const std::int64_t rows = 40009, cols = 53681;  // 2^31 + 239481 elements, odd extents
  REQUIRE(rows * cols > two_31);
  // Coordinates around the middle of both axes (where the first splits fall), the corners,
  // and the elements whose row-major index is near 2^31.
  std::vector<std::array<std::int64_t, 2>> probes = {{0, 0}, {0, cols - 1}, {rows - 1, 0}, {rows - 1, cols - 1}};
  for (const std::int64_t r : {rows / 4 - 1, rows / 4, rows / 2 - 1, rows / 2, rows / 2 + 1})
    for (const std::int64_t c : {std::int64_t{0}, cols / 4, cols / 2 - 1, cols / 2, cols / 2 + 1, cols - 1})
      probes.push_back({r, c});
  for (const std::int64_t i : {two_31 - 1, two_31, two_31 + 1}) probes.push_back({i / cols, i % cols});
  auto element = [](const auto& storage_of, std::int64_t offset) {
    return et::Tensor<float, 1, Gpu>(storage_of.storage(), offset, {1}, {1}).item();
  };
  auto strided_launches_only = [](const test::Launches& seen) {
    return std::all_of(seen.kernel_names.begin(), seen.kernel_names.end(),
                       [](const std::string& name) { return name.find("elementwise_strided") != std::string::npos; });
  };
  const std::uint64_t seed = 91;
  const et::detail::UniformGenerator<float> uniform{seed};

  SECTION("z = a^T * 2 + 1, a transposed (tiles through shared memory, in boxes)") {
    const auto a = et::rand<float>(et::cuda<0>, {cols, rows}, seed);  // a^T[r, c] = uniform(c * rows + r)
    test::LaunchCounter counter;
    const et::Tensor<float, 2, Gpu> z = a.transpose(0, 1) * 2.0f + 1.0f;
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() >= 2);  // one per box
    CHECK(strided_launches_only(seen));
    for (const auto& [r, c] : probes) {
      CAPTURE(r, c);
      CHECK(element(z, r * cols + c) == uniform(c * rows + r) * 2.0f + 1.0f);
    }
  }
  SECTION("a generator written through a transposed view: each box reads it from its own index") {
    auto storage = et::empty<float>(et::cuda<0>, {cols, rows});
    auto into = storage.transpose(0, 1);  // [rows, cols], strides {1, rows}
    into = et::detail::GeneratorExpr<et::detail::UniformGenerator<float>, 2, Gpu>(uniform, {rows, cols});
    for (const auto& [r, c] : probes) {
      CAPTURE(r, c);
      CHECK(element(storage, c * rows + r) == uniform(r * cols + c));
    }
  }
  SECTION("f(x^T) + f(y^T) * 3 with shared subexpressions: the second f materialized per box") {
    const auto x = et::rand<float>(et::cuda<0>, {cols, rows}, seed), y = et::rand<float>(et::cuda<0>, {cols, rows}, seed + 1);
    auto f = [](const auto& u) { return sharing::shared_form<4>(u, 0.75f, 2.0f); };
    const et::Tensor<float, 2, Gpu> z = f(x.transpose(0, 1)) + f(y.transpose(0, 1)) * 3.0f;
    const et::detail::UniformGenerator<float> uniform_y{seed + 1};
    for (const auto& [r, c] : probes) {
      CAPTURE(r, c);
      const std::int64_t at = c * rows + r;
      const double expected = sharing::shared_form_reference(uniform(at), 0.75, 2.0, 4) +
                              3 * sharing::shared_form_reference(uniform_y(at), 0.75, 2.0, 4);
      CHECK(element(z, r * cols + c) == Catch::Detail::Approx(expected).epsilon(1e-5));
    }
  }
}
