// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): element i of a
// tensor drawn with seed s is a pure function of (s, i). The same seed therefore gives
// the same numbers on the CPU and on every GPU, in any launch configuration.
//
// Bit-identical normals need more than the same counter: CUDA's and glibc's log/cos may
// differ in the last bit. So the Box-Muller transform here uses its own log and cos,
// built only from IEEE-exact operations (+ - * / sqrt and explicit fma, all correctly
// rounded on both sides, with every multiply-add written as fma so that no compiler
// contraction can change a result).
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "et/config.hpp"
#include "et/types.hpp"

namespace et::detail {

struct Philox4x32 {
  std::uint32_t word[4];
};

ET_HD std::uint32_t mul_hi(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
#endif
}

/// Philox4x32 with 10 rounds: a 128-bit counter and a 64-bit key give 128 random bits.
ET_HD Philox4x32 philox4x32_10(Philox4x32 counter, std::uint32_t k0, std::uint32_t k1) {
  std::uint32_t c0 = counter.word[0], c1 = counter.word[1], c2 = counter.word[2], c3 = counter.word[3];
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  ET_UNROLL
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t hi0 = mul_hi(m0, c0), lo0 = m0 * c0;
    const std::uint32_t hi1 = mul_hi(m1, c2), lo1 = m1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += w0;
    k1 += w1;
  }
  return {{c0, c1, c2, c3}};
}

/// splitmix64: one well-mixed 64-bit word from another, for deriving seeds on the host
/// (module initializations, dropout calls, the data loader's shuffles).
constexpr std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The random words of element `index` for `seed`: counter = index, key = seed.
ET_HD Philox4x32 random_words(std::int64_t index, std::uint64_t seed) {
  const auto i = static_cast<std::uint64_t>(index);
  return philox4x32_10({{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), 0u, 0u}},
                       static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Uniform in [0, 1) with 53 random bits from two words.
ET_HD double uniform53(std::uint32_t a, std::uint32_t b) {
  const std::uint64_t bits = ((static_cast<std::uint64_t>(a) << 32) | b) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

/// Natural log of u in (0, 1]: u = m * 2^e with m in [sqrt(1/2), sqrt(2)),
/// log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| < 0.1716, series to s^23 (error < 1e-17).
ET_HD double portable_log(double u) {
  int e = 0;
  double m = ::frexp(u, &e);  // u = m * 2^e, m in [0.5, 1): exact
  if (m < 0.70710678118654752440) {
    m = m * 2.0;  // exact
    e -= 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double q = 0.043478260869565216;  // 1/23
  q = ::fma(q, s2, 0.047619047619047616);
  q = ::fma(q, s2, 0.05263157894736842);
  q = ::fma(q, s2, 0.058823529411764705);
  q = ::fma(q, s2, 0.06666666666666667);
  q = ::fma(q, s2, 0.07692307692307693);
  q = ::fma(q, s2, 0.09090909090909091);
  q = ::fma(q, s2, 0.1111111111111111);
  q = ::fma(q, s2, 0.14285714285714285);
  q = ::fma(q, s2, 0.2);
  q = ::fma(q, s2, 0.3333333333333333);
  const double two_s = 2.0 * s;  // exact
  const double log_m = ::fma(two_s, s2 * q, two_s);
  return ::fma(static_cast<double>(e), 0.69314718055994530942, log_m);
}

/// cos(2 pi u) for u in [0, 1), by quarter turns: 4u = n + r, |r| <= 1/2, y = r pi/2.
ET_HD double portable_cos_2pi(double u) {
  const double quarters = 4.0 * u;  // exact
  const double n = ::floor(quarters + 0.5);
  const double y = (quarters - n) * 1.5707963267948966;  // quarters - n is exact
  const double y2 = y * y;
  double c = 1.5619206968586225e-16;  // 1/18!
  c = ::fma(c, y2, -4.779477332387385e-14);
  c = ::fma(c, y2, 1.1470745597729725e-11);
  c = ::fma(c, y2, -2.08767569878681e-09);
  c = ::fma(c, y2, 2.755731922398589e-07);
  c = ::fma(c, y2, -2.48015873015873e-05);
  c = ::fma(c, y2, 0.001388888888888889);
  c = ::fma(c, y2, -0.041666666666666664);
  c = ::fma(c, y2, 0.5);
  const double cos_y = ::fma(-c, y2, 1.0);
  double s = 2.8114572543455206e-15;  // 1/17!
  s = ::fma(s, y2, -7.647163731819816e-13);
  s = ::fma(s, y2, 1.6059043836821613e-10);
  s = ::fma(s, y2, -2.505210838544172e-08);
  s = ::fma(s, y2, 2.7557319223985893e-06);
  s = ::fma(s, y2, -0.0001984126984126984);
  s = ::fma(s, y2, 0.008333333333333333);
  s = ::fma(s, y2, -0.16666666666666666);
  const double sin_y = ::fma(y * y2, s, y);
  switch (static_cast<int>(n) & 3) {
    case 0: return cos_y;
    case 1: return -sin_y;
    case 2: return -cos_y;
    default: return sin_y;
  }
}

/// Uniform [0, 1) elements: double from 53 bits, float from 24, half from 11, bfloat16
/// from 8 (as many as the significand holds, as PyTorch does): every value is exact, so
/// none rounds up to 1.
template <class T>
struct UniformGenerator {
  static_assert(is_floating_v<T>, "et: rand needs a floating-point element type");
  using value_type = T;
  std::uint64_t seed;
  ET_HD T operator()(std::int64_t i) const {
    const Philox4x32 r = random_words(i, seed);
    if constexpr (std::is_same_v<T, double>) {
      return uniform53(r.word[0], r.word[1]);
    } else {
      constexpr int bits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, half> ? 11 : 8;
      return T(static_cast<float>(r.word[0] >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits)));
    }
  }
};

/// Standard normal elements by Box-Muller on two 53-bit uniforms, computed in double and
/// rounded once to T.
template <class T>
struct NormalGenerator {
  static_assert(is_floating_v<T>, "et: randn needs a floating-point element type");
  using value_type = T;
  std::uint64_t seed;
  ET_HD T operator()(std::int64_t i) const {
    const Philox4x32 r = random_words(i, seed);
    const double u1 = 1.0 - uniform53(r.word[0], r.word[1]);  // (0, 1]: log is finite
    const double u2 = uniform53(r.word[2], r.word[3]);
    const double radius = ::sqrt(-2.0 * portable_log(u1));
    return static_cast<T>(radius * portable_cos_2pi(u2));
  }
};

}  // namespace et::detail
