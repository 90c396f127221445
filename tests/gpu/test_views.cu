// No-copy views of CUDA tensors, checked against the same views of CPU tensors (whose
// layouts and values tests/cpu/test_views.cpp checks against a host reference) and,
// for expressions, against double-precision host loops. Kernel and copy counts come
// from CUPTI (cupti_counter.hpp): views launch nothing; a strided expression is one kernel.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../common/random_values.hpp"
#include "cupti_counter.hpp"

namespace {

using Gpu = et::Cuda<0>;
using Catch::Matchers::Contains;

bool ran_kernel_named(const test::Launches& seen, const std::string& name) {
  return std::any_of(seen.kernel_names.begin(), seen.kernel_names.end(),
                     [&](const std::string& kernel) { return kernel.find(name) != std::string::npos; });
}

/// A GPU view and the same view of the same data on the CPU: same layout, same values
/// (read back, and through one evaluation on each device), and the GPU view still
/// shares its base's storage.
template <int R>
void check_same_view(const et::Tensor<float, R, Gpu>& gpu, const et::Tensor<float, R, et::Cpu>& cpu,
                     const std::shared_ptr<void>& gpu_storage) {
  CHECK(gpu.storage() == gpu_storage);
  CHECK(gpu.shape() == cpu.shape());
  CHECK(gpu.strides() == cpu.strides());
  CHECK(gpu.offset() == cpu.offset());
  const std::vector<float> expected = cpu.to_vector();
  CHECK(gpu.to_vector() == expected);
  CHECK(et::eval(gpu * 2.0f).to_vector() == et::eval(cpu * 2.0f).to_vector());
}

}  // namespace

TEST_CASE("views of CUDA tensors read what the same views of CPU tensors read, and launch nothing", "[views][cupti]") {
  const auto shape = GENERATE(values<et::Shape<3>>({{4, 6, 5}, {1, 7, 1}, {3, 0, 2}}));
  const auto [s0, s1, s2] = shape;
  CAPTURE(s0, s1, s2);
  const auto host = test::random_values<float>(static_cast<std::size_t>(s0 * s1 * s2), 10);
  const auto g = et::from_vector(et::cuda<0>, host, shape);
  const auto c = et::from_vector(et::cpu, host, shape);
  const auto& storage = g.storage();

  auto views_of = [&](const auto& x) {
    return std::make_tuple(x.transpose(0, 2), x.permute({1, 2, 0}), x.slice(1, s1 / 3, s1, 2), x.select(-1, s2 - 1),
                           x.unsqueeze(1), x.slice(0, 0, 1).squeeze(0), x.unsqueeze(0).expand({2, -1, -1, -1}),
                           x.view({s0, -1}), x.reshape({-1}),
                           x.transpose(0, 2).slice(0, 0, s2, 2).unsqueeze(0).expand({3, -1, -1, -1}).select(3, -1));
  };
  test::LaunchCounter counter;
  const auto on_gpu = views_of(g);
  const test::Launches seen = counter.stop();
  CHECK(seen.kernels() == 0);
  CHECK(seen.memcpys == 0);
  CHECK(seen.memsets == 0);
  const auto on_cpu = views_of(c);
  std::apply([&](const auto&... gpu) { std::apply([&](const auto&... cpu) { (check_same_view(gpu, cpu, storage), ...); }, on_cpu); },
             on_gpu);
}

TEST_CASE("writing into views of CUDA tensors writes into the base", "[views]") {
  const auto host = test::random_values<float>(40, 20);
  auto g = et::from_vector(et::cuda<0>, host, {5, 8});
  auto c = et::from_vector(et::cpu, host, {5, 8});
  const auto y_host = test::random_values<float>(20, 21);
  const auto yg = et::from_vector(et::cuda<0>, y_host, {5, 4});
  const auto yc = et::from_vector(et::cpu, y_host, {5, 4});

  g.slice(1, 1, 8, 2) = yg;  // every other column
  c.slice(1, 1, 8, 2) = yc;
  CHECK(g.to_vector() == c.to_vector());
  g.select(0, -1) = 7.0f;  // the last row
  c.select(0, -1) = 7.0f;
  CHECK(g.to_vector() == c.to_vector());
  g.transpose(0, 1).select(0, 2) += g.select(1, 0) * 2.0f;  // column 2 += 2 * column 0
  c.transpose(0, 1).select(0, 2) += c.select(1, 0) * 2.0f;
  CHECK(g.to_vector() == c.to_vector());
  g.slice(0, 1, 4).slice(1, -3, 8).view({3, 1, 3}).copy_(yg.view({20}).slice(0, 0, 18, 2).view({3, 1, 3}));
  c.slice(0, 1, 4).slice(1, -3, 8).view({3, 1, 3}).copy_(yc.view({20}).slice(0, 0, 18, 2).view({3, 1, 3}));
  CHECK(g.to_vector() == c.to_vector());
  const std::vector<float> before = g.to_vector();
  CHECK_THROWS_MATCHES(g.select(0, 0).unsqueeze(0).expand({3, 8}) = 1.0f, et::Error,
                       Catch::Matchers::Message("et: cannot write into a tensor whose elements overlap in memory (shape "
                                                "[3, 8], strides [0, 1]: axis 0 has stride 0, as after expand()); write "
                                                "into a contiguous() copy instead"));
  CHECK(g.to_vector() == before);
}

TEST_CASE("contiguous() and reshape() copy CUDA tensors only when they must", "[views][cupti]") {
  const auto host = test::random_values<float>(63, 30);
  const auto g = et::from_vector(et::cuda<0>, host, {7, 9});
  const auto c = et::from_vector(et::cpu, host, {7, 9});

  test::LaunchCounter counter;
  const auto same = g.contiguous();
  const auto viewed = g.reshape({3, -1, 7});
  const test::Launches none = counter.stop();
  CHECK(none.kernels() == 0);
  CHECK(same.data() == g.data());
  CHECK(viewed.storage() == g.storage());

  test::LaunchCounter copying;
  const auto dense = g.transpose(0, 1).contiguous();
  const auto flat = g.slice(1, 0, 9, 2).reshape({-1});
  const test::Launches copies = copying.stop();
  CHECK(copies.kernels() == 2);  // one elementwise copy each
  CHECK(dense.storage() != g.storage());
  CHECK(dense.is_contiguous());
  CHECK(dense.to_vector() == c.transpose(0, 1).contiguous().to_vector());
  CHECK(flat.storage() != g.storage());
  CHECK(flat.shape() == et::Shape<1>{35});
  CHECK(flat.to_vector() == c.slice(1, 0, 9, 2).reshape({-1}).to_vector());
  // An expanded view: contiguous() is a writable copy.
  auto rows = g.select(0, 3).unsqueeze(0).expand({4, 9}).contiguous();
  rows.select(0, 0) = 0.0f;
  const auto rows_values = rows.to_vector();
  CHECK(std::all_of(rows_values.begin(), rows_values.begin() + 9, [](float v) { return v == 0.0f; }));
  for (std::size_t r = 1; r < 4; ++r) CHECK(std::equal(host.begin() + 27, host.begin() + 36, rows_values.begin() + 9 * r));
  CHECK(g.to_vector() == host);
}

TEST_CASE("x = x.transpose(0, 1) and in-place transposes of square CUDA matrices", "[views][assign]") {
  const std::int64_t n = GENERATE(1, 7, 300);
  CAPTURE(n);
  const auto host = test::random_values<float>(static_cast<std::size_t>(n * n), 40 + static_cast<std::uint64_t>(n));
  std::vector<float> transposed(host.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      transposed[static_cast<std::size_t>(i * n + j)] = host[static_cast<std::size_t>(j * n + i)];

  auto x = et::from_vector(et::cuda<0>, host, {n, n});
  const auto storage = x.storage();
  x = x.transpose(0, 1);  // rebinds the handle: a view, no data moves
  CHECK(x.storage() == storage);
  CHECK(x.to_vector() == transposed);

  auto y = et::from_vector(et::cuda<0>, host, {n, n});
  y.copy_(y.transpose(0, 1));  // in place: through a temporary
  CHECK(y.to_vector() == transposed);
  y.view({n, n}) = y.transpose(0, 1);
  CHECK(y.to_vector() == host);
  y.transpose(0, 1) = y * 1.0f;
  CHECK(y.to_vector() == transposed);
  y.slice(0, 1, n) = y.slice(0, 0, n - 1);  // rows move down by one, overlapping
  std::vector<float> shifted = transposed;
  std::copy(transposed.begin(), transposed.end() - n, shifted.begin() + n);
  CHECK(y.to_vector() == shifted);
}

TEST_CASE("an expression over a stepped slice and an expanded operand runs one strided kernel", "[views][cupti][expr]") {
  const auto extents = GENERATE(values<std::array<std::int64_t, 2>>({{1, 1}, {67, 129}, {1000, 1003}}));
  const std::int64_t m = extents[0], n = extents[1];
  CAPTURE(m, n);
  const auto a_host = test::random_values<float>(static_cast<std::size_t>(m * 2 * n), 50);
  const auto c_host = test::random_values<float>(static_cast<std::size_t>(n), 51);
  const auto a = et::from_vector(et::cuda<0>, a_host, {m, 2 * n});
  const auto c = et::from_vector(et::cuda<0>, c_host, {n});

  test::LaunchCounter counter;
  const et::Tensor<float, 2, Gpu> z = a.slice(1, 1, 2 * n, 2) * c.unsqueeze(0).expand({m, n}) + 1.0f;
  const test::Launches seen = counter.stop();
  CAPTURE(seen.kernel_names);
  CHECK(seen.kernels() == 1);
  if (m * n > 1) CHECK(ran_kernel_named(seen, "elementwise_strided"));

  const std::vector<float> got = z.to_vector();
  std::size_t wrong = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double want = double(a_host[static_cast<std::size_t>(i * 2 * n + 2 * j + 1)]) * c_host[static_cast<std::size_t>(j)] + 1.0;
      if (std::fabs(got[static_cast<std::size_t>(i * n + j)] - want) > 1e-6 * (1 + std::fabs(want))) ++wrong;
    }
  CHECK(wrong == 0);
}
