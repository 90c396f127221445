// Creation functions, random numbers and host-side errors, on the CPU.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cmath>
#include <cstring>
#include <numeric>

using Catch::Matchers::Contains;

TEST_CASE("empty, zeros, ones, full: shape, strides, values", "[creation]") {
  const auto e = et::empty<double>(et::cpu, {3, 4, 5});
  CHECK(e.shape() == et::Shape<3>{3, 4, 5});
  CHECK(e.strides() == et::Shape<3>{20, 5, 1});
  CHECK(e.numel() == 60);
  CHECK(e.is_contiguous());
  CHECK(reinterpret_cast<std::uintptr_t>(e.data()) % 64 == 0);

  const auto z = et::zeros<std::int64_t>(et::cpu, {7});
  for (auto v : z.to_vector()) CHECK(v == 0);
  const auto o = et::ones<std::int32_t>(et::cpu, {2, 3});
  for (auto v : o.to_vector()) CHECK(v == 1);
  const auto f = et::full<float>(et::cpu, {5, 1}, 2.5);
  for (auto v : f.to_vector()) CHECK(v == 2.5f);
  const auto m = et::full<bool>(et::cpu, {4}, true);
  for (bool v : m.to_vector()) CHECK(v);

  const auto scalar = et::full<double>(et::cpu, et::Shape<0>{}, -3.0);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.item() == -3.0);

  const auto none = et::zeros<float>(et::cpu, {0, 4});
  CHECK(none.numel() == 0);
  CHECK(none.to_vector().empty());
}

TEST_CASE("bad extents are rejected with the shape in the message", "[creation][errors]") {
  CHECK_THROWS_MATCHES(et::empty<float>(et::cpu, {2, -1}), et::ShapeError,
                       Catch::Matchers::Message("et: negative extent -1 at axis 1 of shape [2, -1]"));
  CHECK_THROWS_WITH(et::zeros<float>(et::cpu, {std::int64_t{1} << 40, std::int64_t{1} << 40}),
                    Contains("more elements than fit in 64 bits"));
  CHECK_THROWS_WITH(et::ones<double>(et::cpu, {std::int64_t{1} << 62}), Contains("more bytes than fit"));
}

TEST_CASE("host allocation failure is et::OutOfMemory with the sizes", "[creation][errors]") {
  try {
    (void)et::empty<float>(et::cpu, {std::int64_t{1} << 50});  // 4 PiB: no machine has it
    FAIL("expected et::OutOfMemory");
  } catch (const et::OutOfMemory& oom) {
    CHECK(oom.requested_bytes() == std::size_t{4} << 50);
    CHECK(oom.total_bytes() > 0);
    CHECK(oom.free_bytes() <= oom.total_bytes());
    CHECK_THAT(std::string(oom.what()), Contains("et: out of memory on cpu: tried to allocate 4.00 PiB"));
    CHECK_THAT(std::string(oom.what()), Contains("the host allocator refused it") && !Contains("retried"));
  }
  // The process goes on.
  CHECK(et::ones<float>(et::cpu, {3}).to_vector() == std::vector<float>{1, 1, 1});
}

TEST_CASE("CUDA devices past the count are an et::Error naming index and count", "[creation][errors]") {
  if (et::device_count() > 5) return;  // only meaningful where cuda:5 does not exist
  CHECK_THROWS_WITH(et::zeros<float>(et::cuda<5>, {4}), Contains("cuda:5 was requested"));
  CHECK_THROWS_AS(et::ones<float>(et::cpu, {2}).to(et::cuda<5>), et::Error);
}

TEST_CASE("arange and linspace", "[creation]") {
  CHECK(et::arange<std::int32_t>(et::cpu, 5).to_vector() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(et::arange<std::int64_t>(et::cpu, 0).numel() == 0);
  CHECK(et::arange<double>(et::cpu, 1.0, 2.0, 0.25).to_vector() == std::vector<double>{1.0, 1.25, 1.5, 1.75});
  CHECK(et::arange<std::int64_t>(et::cpu, 10, 0, -3).to_vector() == std::vector<std::int64_t>{10, 7, 4, 1});
  CHECK(et::arange<float>(et::cpu, 0, 1, 0.3).numel() == 4);  // ceil(1 / 0.3)
  CHECK_THROWS_WITH(et::arange<float>(et::cpu, 0, 1, 0), Contains("step must not be zero"));
  CHECK_THROWS_WITH(et::arange<float>(et::cpu, 0, INFINITY, 1), Contains("arange end must be finite"));
  CHECK_THROWS_AS(et::arange<float>(et::cpu, 5, 0, 1), et::ShapeError);
  CHECK_THROWS_AS(et::arange<float>(et::cpu, -1), et::ShapeError);

  for (std::int64_t n : {0, 1, 2, 7, 1000}) {
    CAPTURE(n);
    const auto v = et::linspace<double>(et::cpu, -2.0, 3.0, n).to_vector();
    REQUIRE(static_cast<std::int64_t>(v.size()) == n);
    if (n == 0) continue;
    CHECK(v.front() == -2.0);
    if (n > 1) CHECK(v.back() == 3.0);  // exact, computed from the end
    for (std::int64_t i = 0; i < n; ++i) {
      const double expected = n == 1 ? -2.0 : -2.0 + 5.0 * static_cast<double>(i) / static_cast<double>(n - 1);
      CHECK(v[static_cast<std::size_t>(i)] == Approx(expected).margin(1e-12));
    }
  }
  CHECK_THROWS_WITH(et::linspace<float>(et::cpu, NAN, 1, 3), Contains("linspace start must be finite"));
  CHECK_THROWS_AS(et::linspace<float>(et::cpu, 0, 1, -1), et::ShapeError);
}

TEST_CASE("from_vector, to_vector, item", "[creation]") {
  const std::vector<std::int32_t> values{1, 2, 3, 4, 5, 6};
  const auto t = et::from_vector(et::cpu, values, {2, 3});
  CHECK(t.shape() == et::Shape<2>{2, 3});
  CHECK(t.to_vector() == values);
  CHECK(et::from_vector(et::cpu, std::vector<bool>{true, false, true}).to_vector() ==
        std::vector<bool>{true, false, true});
  CHECK_THROWS_MATCHES(et::from_vector(et::cpu, values, {4, 2}), et::ShapeError,
                       Catch::Matchers::Message("et: from_vector got 6 values for shape [4, 2] (8 elements)"));
  CHECK(et::from_vector(et::cpu, std::vector<double>{4.5}, {1, 1}).item() == 4.5);
  CHECK_THROWS_MATCHES(t.item(), et::ShapeError,
                       Catch::Matchers::Message("et: item() needs exactly one element, but the tensor has shape [2, 3] (6 elements)"));
  const et::Tensor<float, 2> undefined;
  CHECK_FALSE(undefined.defined());
  CHECK_THROWS_WITH(undefined.item(), Contains("undefined"));
  CHECK_THROWS_WITH(undefined.to_vector(), Contains("undefined"));
}

TEST_CASE("handles alias, clone copies, to(cpu) is the same tensor", "[creation]") {
  auto a = et::arange<float>(et::cpu, 6);
  auto alias = a;
  const auto copy = a.clone();
  const auto same = a.to(et::cpu);
  CHECK(same.storage() == a.storage());
  CHECK(et::to<et::Cpu>(a).storage() == a.storage());
  CHECK(copy.storage() != a.storage());
  a += 10.0f;
  CHECK(alias.to_vector() == std::vector<float>{10, 11, 12, 13, 14, 15});
  CHECK(copy.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});

  // A transposed view clones with its strides; to_vector still reads row-major.
  const auto m = et::arange<std::int64_t>(et::cpu, 6);
  const et::Tensor<std::int64_t, 2> transposed(m.storage(), 0, {3, 2}, {1, 3});
  CHECK_FALSE(transposed.is_contiguous());
  const auto cloned = transposed.clone();
  CHECK(cloned.strides() == transposed.strides());
  CHECK(cloned.to_vector() == std::vector<std::int64_t>{0, 3, 1, 4, 2, 5});
}

// --- Random numbers: an independent Philox4x32-10 and Box-Muller in long double. ----

namespace {
std::array<std::uint32_t, 4> reference_philox(std::array<std::uint32_t, 4> c, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0], p1 = std::uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}
}  // namespace

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[random]") {
  struct Kat {
    std::array<std::uint32_t, 4> counter;
    std::uint32_t k0, k1;
    std::array<std::uint32_t, 4> expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff,
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& kat : kats) {
    const auto out = et::detail::philox4x32_10({{kat.counter[0], kat.counter[1], kat.counter[2], kat.counter[3]}},
                                               kat.k0, kat.k1);
    for (int w = 0; w < 4; ++w) CHECK(out.word[w] == kat.expected[static_cast<std::size_t>(w)]);
    CHECK(reference_philox(kat.counter, kat.k0, kat.k1) == kat.expected);
  }
}

TEST_CASE("rand: uniform [0, 1), a function of (seed, index) only", "[random]") {
  const std::int64_t n = 1 << 20;
  const auto a = et::rand<float>(et::cpu, {n}, 1234).to_vector();
  const auto d = et::rand<double>(et::cpu, {1024, 1024}, 1234).to_vector();
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i] >= 0.0f);
    REQUIRE(a[i] < 1.0f);
    sum += a[i];
    sum_sq += static_cast<double>(a[i]) * a[i];
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  CHECK(mean == Approx(0.5).margin(5 * std::sqrt(1.0 / 12 / n)));
  CHECK(var == Approx(1.0 / 12).margin(1e-3));
  // Element i of any shape is the same number: it depends only on (seed, i).
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{777}, d.size() - 1}) {
    const auto words = reference_philox({static_cast<std::uint32_t>(i), 0, 0, 0}, 1234, 0);
    CHECK(a[i] == static_cast<float>(words[0] >> 8) * 0x1.0p-24f);
    const std::uint64_t bits = ((std::uint64_t{words[0]} << 32) | words[1]) >> 11;
    CHECK(d[i] == static_cast<double>(bits) * 0x1.0p-53);
  }
  CHECK(et::rand<float>(et::cpu, {8}, 1).to_vector() != et::rand<float>(et::cpu, {8}, 2).to_vector());
  CHECK(et::rand<float>(et::cpu, {8}, 99).to_vector() == et::rand<float>(et::cpu, {2, 4}, 99).to_vector());
}

TEST_CASE("randn: Box-Muller on Philox words, checked against long double", "[random]") {
  const std::uint64_t seed = 0x0123456789abcdefULL;
  const auto v = et::randn<double>(et::cpu, {1 << 20}, seed).to_vector();
  const auto f = et::randn<float>(et::cpu, {1 << 20}, seed).to_vector();
  double sum = 0, sum_sq = 0, worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    sum_sq += v[i] * v[i];
    CHECK(f[i] == static_cast<float>(v[i]));  // float draws are the rounded double draws
    if (i % 97 == 0) {
      const auto w = reference_philox({static_cast<std::uint32_t>(i), 0, 0, 0}, static_cast<std::uint32_t>(seed),
                                      static_cast<std::uint32_t>(seed >> 32));
      const auto u = [](std::uint32_t hi, std::uint32_t lo) {
        return static_cast<long double>(((std::uint64_t{hi} << 32) | lo) >> 11) * 0x1.0p-53L;
      };
      const long double u1 = 1.0L - u(w[0], w[1]), u2 = u(w[2], w[3]);
      const long double expected = std::sqrt(-2.0L * std::log(u1)) * std::cos(2.0L * 3.14159265358979323846264L * u2);
      worst = std::max(worst, static_cast<double>(std::fabs(expected - static_cast<long double>(v[i]))));
    }
  }
  CHECK(worst < 1e-14);
  const double n = static_cast<double>(v.size()), mean = sum / n, var = sum_sq / n - mean * mean;
  CHECK(mean == Approx(0.0).margin(5 / std::sqrt(n)));
  CHECK(var == Approx(1.0).margin(5 * std::sqrt(2 / n)));
}

TEST_CASE("the portable log and cos are accurate across their whole range", "[random]") {
  double worst_log = 0, worst_cos = 0;
  for (int k = 0; k <= 100000; ++k) {
    const double u = k == 0 ? 0x1.0p-53 : static_cast<double>(k) / 100000.0;
    worst_log = std::max(worst_log, std::fabs(et::detail::portable_log(u) - std::log(u)));
    const double t = static_cast<double>(k) / 100001.0;
    worst_cos = std::max(worst_cos, std::fabs(et::detail::portable_cos_2pi(t) - std::cos(2 * M_PI * t)));
  }
  CHECK(worst_log < 1e-14);
  CHECK(worst_cos < 1e-15);
}
