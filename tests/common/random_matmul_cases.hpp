// Randomized differential tests of the matrix-product family (random_cases.hpp has the
// machinery): et::matmul over random M, N, K (0, 1, odd, past a tile), unbatched or
// batched with broadcast batches (a 2-d operand, or a batch of 1, against a batch of B),
// each operand laid out directly or as the transpose of its transpose (so every
// combination of cuBLAS's / Eigen's transpose flags is taken), in the four floating types,
// against the double-precision triple loop of matmul_reference.hpp, element by element on
// the scale of sum_k |a_ik b_kj|. Shared by the CPU and GPU tests.
#pragma once

#include "matmul_reference.hpp"
#include "random_cases.hpp"

#include <array>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

namespace test {

/// A [batch?, rows, cols] operand on D: contiguous, or a transposed view of the transpose.
template <class T, std::size_t R, class D>
et::Tensor<T, int(R), D> random_matrix(D dev, const std::array<std::int64_t, R>& shape, bool transposed,
                                  std::mt19937_64& rng) {
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::array<std::int64_t, R> stored = shape;
  if (transposed) std::swap(stored[R - 2], stored[R - 1]);
  std::int64_t n = 1;
  for (auto e : stored) n *= e;
  std::vector<T> values(static_cast<std::size_t>(n));
  for (T& v : values) v = static_cast<T>(value(rng));
  const auto t = et::from_vector(et::cpu, values, stored).to(dev);
  return transposed ? t.transpose(int(R) - 2, int(R) - 1) : t;
}

/// One product: rank 2 x 2, 3 x 3, 3 x 2 or 2 x 3, then compared. False when it failed.
template <class T, int RA, int RB, class D>
bool run_matmul_shapes(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 5, 7, 8, 13, 17, 33, 64};
  const std::int64_t m = extents[rng() % 12], n = extents[rng() % 12], k = extents[rng() % 12];
  const std::int64_t batch = static_cast<std::int64_t>(rng() % 4);
  std::array<std::int64_t, RA> a_shape{};
  std::array<std::int64_t, RB> b_shape{};
  a_shape[RA - 2] = m, a_shape[RA - 1] = k;
  b_shape[RB - 2] = k, b_shape[RB - 1] = n;
  if constexpr (RA == 3) a_shape[0] = rng() % 3 == 0 ? 1 : batch;
  if constexpr (RB == 3) b_shape[0] = RA == 3 && a_shape[0] == 1 ? batch : (rng() % 3 == 0 ? 1 : batch);
  if constexpr (RA == 3 && RB == 3)
    if (a_shape[0] != b_shape[0] && a_shape[0] != 1 && b_shape[0] != 1) b_shape[0] = 1;
  const bool ta = rng() % 2 == 0, tb = rng() % 2 == 0;
  const auto a = random_matrix<T>(dev, a_shape, ta, rng);
  const auto b = random_matrix<T>(dev, b_shape, tb, rng);
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": " << type_name(T{}) << " " << et::format_shape(a_shape)
       << (ta ? " (transposed)" : "") << " @ " << et::format_shape(b_shape) << (tb ? " (transposed)" : "");
  INFO(what.str());
  const auto got = et::eval(et::matmul(a, b)).to_vector();
  const Product want = reference_product(host_matrices(a), host_matrices(b));
  if (got.size() != want.value.size()) {
    CHECK(got.size() == want.value.size());
    return false;
  }
  if (const std::int64_t e = first_product_miss(got, want, product_tolerance<T>()); e >= 0) {
    const auto at = static_cast<std::size_t>(e);
    CAPTURE(e, as_double(got[at]), want.value[at], want.scale[at]);
    CHECK(false);
    return false;
  }
  return true;
}

/// The matrix-product family, every rank combination, the four floating types.
template <class D>
void run_matmul_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 3;
  std::mt19937_64 rng(seed);
  run_family("matmul", where, seed, rng, [&](auto tag, std::int64_t c) {
    using T = decltype(tag);
    switch (rng() % 4) {
      case 0: return run_matmul_shapes<T, 2, 2>(dev, rng, seed, c);
      case 1: return run_matmul_shapes<T, 3, 3>(dev, rng, seed, c);
      case 2: return run_matmul_shapes<T, 3, 2>(dev, rng, seed, c);
      default: return run_matmul_shapes<T, 2, 3>(dev, rng, seed, c);
    }
  });
}

}  // namespace test
