// et::half (IEEE binary16) and et::bfloat16: 16-bit element types for storage.
// Each is a trivially copyable struct of its raw bits, laid out like CUDA's __half and
// __nv_bfloat16, usable in host and device code. They have no arithmetic of their own:
// they convert to float, and expressions compute on them in float (types.hpp: compute_t),
// rounding once when the result is stored.
//
// Conversions agree bit for bit on the host and the device. On the device they are
// CUDA's intrinsics; on the host a software version of the same rounding:
//  - float -> 16 bits rounds to nearest even, overflows to infinity, keeps subnormals,
//    and turns every NaN into CUDA's canonical NaN 0x7FFF (sign dropped);
//  - double and integers -> 16 bits round once, correctly (through a round-to-odd float,
//    so no double rounding);
//  - 16 bits -> float is exact; a half NaN becomes float's canonical NaN 0x7FFFFFFF as in
//    CUDA's host code (the device may keep the payload); a bfloat16 NaN keeps its payload.
// So half -> float -> half gives back the same bits for every non-NaN half (and
// likewise for bfloat16); a NaN comes back as 0x7FFF.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "et/config.hpp"

#if defined(ET_DEVICE_COMPILER)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace et {

namespace detail {

ET_HD std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

ET_HD float float_from_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// float -> binary16, round to nearest even: the host twin of __float2half_rn.
ET_HD std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = float_bits(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7fffu;                                    // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (magnitude >= 0x38800000u) {  // a normal half: rebias the exponent, round off 13 bits
    const std::uint32_t rebiased = magnitude - 0x38000000u;
    return static_cast<std::uint16_t>(sign | ((rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25 (a tie, to even) -> 0
  // A subnormal half: the 24-bit significand shifted right by 14..24 places.
  const std::uint32_t shift = 126u - (magnitude >> 23);
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t truncated = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  const bool round_up = remainder > halfway || (remainder == halfway && (truncated & 1u) != 0);
  return static_cast<std::uint16_t>(sign | (truncated + (round_up ? 1u : 0u)));
}

/// binary16 -> float, exact: the host twin of __half2float.
ET_HD float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1fu) return float_from_bits(mantissa != 0 ? 0x7fffffffu : (sign | 0x7f800000u));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal: exact
  return sign != 0 ? -magnitude : magnitude;
}

/// float -> bfloat16, round to nearest even: the host twin of __float2bfloat16_rn.
ET_HD std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

ET_HD float bfloat16_bits_to_float(std::uint16_t bits) { return float_from_bits(static_cast<std::uint32_t>(bits) << 16); }

// Rounding to float first and to 16 bits next can round twice the wrong way (a value just
// above a tie lands on the tie). Rounding to odd first cannot: a float keeps 24 bits, at
// least 2 more than twice the 11 (half) or 8 (bfloat16) kept in the end.

/// value rounded to float toward zero, with the last bit set when that was inexact.
ET_HD float double_to_float_odd(double value) {
  const float nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || value != value) return nearest;  // exact, or NaN
  const bool away_from_zero = value > 0 ? static_cast<double>(nearest) > value : static_cast<double>(nearest) < value;
  return float_from_bits((float_bits(nearest) - (away_from_zero ? 1u : 0u)) | 1u);
}

/// The same for integers: the magnitude is cut to 24 bits, a lost 1 bit sets the last one.
template <class I>
ET_HD float integer_to_float_odd(I value) {
  bool negative = false;
  if constexpr (std::is_signed_v<I>) negative = value < 0;
  std::uint64_t magnitude = static_cast<std::uint64_t>(value);
  if (negative) magnitude = 0 - magnitude;
  std::uint32_t scale = 127;  // the biased exponent of the power of two the magnitude is cut by
  std::uint64_t sticky = 0;
  while (magnitude >= (std::uint64_t{1} << 24)) {
    sticky |= magnitude & 1u;
    magnitude >>= 1;
    ++scale;
  }
  const float cut = static_cast<float>(magnitude | sticky) * float_from_bits(scale << 23);  // exact
  return negative ? -cut : cut;
}

}  // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits; largest finite 65504.
struct half {
  std::uint16_t bits;  ///< the raw binary16 encoding

  half() = default;  // trivial: uninitialized, like float (half{} is +0)
  /// Rounds to nearest even (__float2half_rn on the device).
  ET_HD explicit half(float value) {
#if defined(__CUDA_ARCH__)
    bits = __half_as_ushort(__float2half_rn(value));
#else
    bits = detail::float_to_half_bits(value);
#endif
  }
  /// Rounds once, to nearest even.
  ET_HD explicit half(double value) : half(detail::double_to_float_odd(value)) {}
  template <std::integral I>
  ET_HD explicit half(I value) : half(detail::integer_to_float_odd(value)) {}

  /// Exact.
  ET_HD operator float() const {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return detail::half_bits_to_float(bits);
#endif
  }

  ET_HD static half from_bits(std::uint16_t raw) {
    half h;
    h.bits = raw;
    return h;
  }
};

/// bfloat16: the upper half of a float (1 sign, 8 exponent, 7 mantissa bits).
struct bfloat16 {
  std::uint16_t bits;  ///< the raw bfloat16 encoding

  bfloat16() = default;  // trivial: uninitialized, like float (bfloat16{} is +0)
  /// Rounds to nearest even (__float2bfloat16_rn on the device).
  ET_HD explicit bfloat16(float value) {
#if defined(__CUDA_ARCH__)
    bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
#else
    bits = detail::float_to_bfloat16_bits(value);
#endif
  }
  /// Rounds once, to nearest even.
  ET_HD explicit bfloat16(double value) : bfloat16(detail::double_to_float_odd(value)) {}
  template <std::integral I>
  ET_HD explicit bfloat16(I value) : bfloat16(detail::integer_to_float_odd(value)) {}

  /// Exact.
  ET_HD operator float() const {
#if defined(__CUDA_ARCH__)
    return __bfloat162float(__ushort_as_bfloat16(bits));
#else
    return detail::bfloat16_bits_to_float(bits);
#endif
  }

  ET_HD static bfloat16 from_bits(std::uint16_t raw) {
    bfloat16 b;
    b.bits = raw;
    return b;
  }
};

static_assert(sizeof(half) == 2 && alignof(half) == 2 && std::is_trivially_copyable_v<half>);
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);
#if defined(ET_DEVICE_COMPILER)
// A tensor's data() can be handed to CUDA code that expects CUDA's own types.
static_assert(sizeof(half) == sizeof(__half) && alignof(half) == alignof(__half));
static_assert(sizeof(bfloat16) == sizeof(__nv_bfloat16) && alignof(bfloat16) == alignof(__nv_bfloat16));
#endif

}  // namespace et
