// Element types and the promotion rules for mixed operands (PyTorch's).
//
// Element types, by rank: bool < uint8 < int32 < int64 < {half, bfloat16} < float < double.
//  - Two tensor operands promote to the higher rank; half with bfloat16 gives float
//    (neither holds the other's values).
//  - An integer or bool combined with a floating type gives that floating type
//    (int64 + half is half).
//  - A plain C++ scalar never widens a tensor of the same category (float tensor * 2.0
//    stays float, half tensor * 2.0 stays half, int32 tensor + 1L stays int32, uint8
//    tensor + 1 stays uint8), but a floating scalar lifts an integer or bool tensor to
//    float (PyTorch's default dtype). An integer scalar must fit the tensor's type.
//  - Integer arithmetic wraps, uint8's modulo 256 (200 + 100 is 44 in uint8, as PyTorch).
//  - Math functions (exp, sqrt, ...) and true division of integers give float; of a
//    floating type, that type (exp(half) is half). Comparisons give bool.
//  - et::cast<U>(e) gives U.
//
// Compute types: half and bfloat16 are storage types. Expressions compute on them in
// float (compute_t): each element is converted to float when loaded, the whole fused
// expression runs in float, and the result is rounded once to the destination's type
// when stored. Reductions accumulate half and bfloat16 in float too. A scalar is held
// in the compute type of the type it takes: half_tensor * 0.1 multiplies by 0.1f, as
// PyTorch does, not by 0.1 rounded to half.
//
//            bool   uint8  int32  int64  half   bf16   float  double
//   bool     bool   uint8  int32  int64  half   bf16   float  double
//   uint8           uint8  int32  int64  half   bf16   float  double
//   int32                  int32  int64  half   bf16   float  double
//   int64                         int64  half   bf16   float  double
//   half                                 half   float  float  double
//   bf16                                        bf16   float  double
//   float                                              float  double
//   double                                                    double
#pragma once

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "et/config.hpp"
#include "et/half.hpp"
#include "et/runtime/error.hpp"

namespace et {

template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::int32_t> ||
                  std::same_as<T, std::int64_t> || std::same_as<T, std::uint8_t> || std::same_as<T, bool> ||
                  std::same_as<T, half> || std::same_as<T, bfloat16>;

/// The element type's name as PyTorch spells it: "float32", "float64", "float16",
/// "bfloat16", "int32", "int64", "uint8", "bool" (printing, DLPack and error messages).
template <Element T>
inline constexpr const char* dtype_name = std::is_same_v<T, float>          ? "float32"
                                          : std::is_same_v<T, double>       ? "float64"
                                          : std::is_same_v<T, half>         ? "float16"
                                          : std::is_same_v<T, bfloat16>     ? "bfloat16"
                                          : std::is_same_v<T, std::int32_t> ? "int32"
                                          : std::is_same_v<T, std::int64_t> ? "int64"
                                          : std::is_same_v<T, std::uint8_t> ? "uint8"
                                                                            : "bool";

/// A plain C++ arithmetic value (or an et::half / et::bfloat16 value) that can appear in
/// an expression beside tensors.
template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>> || std::same_as<std::remove_cvref_t<S>, half> ||
                 std::same_as<std::remove_cvref_t<S>, bfloat16>;

namespace detail {

/// half or bfloat16: stored in 16 bits, computed in float.
template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// float, double, half and bfloat16: what decides floating-point behaviour in the library
/// (std::is_floating_point_v does not know the 16-bit types).
template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_16bit_float_v<T>;

/// The type an element of type T is computed in: float for half and bfloat16, else T.
/// Functors only ever see compute types (float, double, int32, int64, bool).
template <class T>
using compute_t = std::conditional_t<is_16bit_float_v<T>, float, T>;

/// A value of a floating type as double, through its compute type (half -> float -> double),
/// and back: what kernels that accumulate in double read and write.
template <class T>
ET_HD double as_double(T v) {
  return static_cast<double>(static_cast<compute_t<T>>(v));
}
template <class T>
ET_HD T from_double(double v) {
  return static_cast<T>(static_cast<compute_t<T>>(v));
}

template <class T>
constexpr int type_rank() {
  if constexpr (std::is_same_v<T, bool>) return 0;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return 1;
  else if constexpr (std::is_same_v<T, std::int32_t>) return 2;
  else if constexpr (std::is_same_v<T, std::int64_t>) return 3;
  else if constexpr (is_16bit_float_v<T>) return 4;
  else if constexpr (std::is_same_v<T, float>) return 5;
  else return 6;
}

/// The higher-ranked of A and B; half with bfloat16 gives float.
template <class A, class B>
using promote_t = std::conditional_t<is_16bit_float_v<A> && is_16bit_float_v<B> && !std::is_same_v<A, B>, float,
                                     std::conditional_t<(type_rank<A>() >= type_rank<B>()), A, B>>;

/// promote_t over any number of types.
template <class T, class... Rest>
struct promote_all {
  using type = T;
};
template <class A, class B, class... Rest>
struct promote_all<A, B, Rest...> : promote_all<promote_t<A, B>, Rest...> {};
template <class... Ts>
using promote_all_t = typename promote_all<Ts...>::type;

/// The type a math function computes in: float for integers and bool, else itself.
template <class T>
using floating_t = std::conditional_t<is_floating_v<T>, T, float>;

/// The element type a C++ scalar S takes when it meets a tensor of element type T.
template <class T, class S>
using scalar_type_t = std::conditional_t<
    is_floating_v<S>, std::conditional_t<is_floating_v<T>, T, float>,
    std::conditional_t<std::is_same_v<S, bool> || !std::is_same_v<T, bool>, T, std::int64_t>>;

/// The element type a C++ scalar has on its own (for et::full and friends).
template <class S>
using scalar_element_t =
    std::conditional_t<std::is_same_v<S, bool> || is_16bit_float_v<S>, S,
                       std::conditional_t<std::is_floating_point_v<S>, std::conditional_t<sizeof(S) <= 4, float, double>,
                                          std::conditional_t<sizeof(S) <= 4, std::int32_t, std::int64_t>>>;

/// One past the largest value of the integer type T (2^8 for uint8, 2^31, 2^63): exact in
/// float and double, the bound every conversion into T checks against.
template <class T>
inline constexpr double integer_end_v = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;

/// `value` as T. For an integer T, throws et::Error when T cannot hold it: NaN, infinities
/// and out-of-range values would otherwise convert with undefined behaviour (or, for
/// uint8, wrap: PyTorch refuses uint8 tensor + 300 too).
template <class T, class S>
T scalar_as(S value, const char* what) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<S, bool>) {
    bool fits = true;
    if constexpr (std::is_floating_point_v<S>) {
      // T's min (0 or -2^(bits-1)) and integer_end_v are exact in S.
      const S low = static_cast<S>(std::numeric_limits<T>::min());
      const S high = static_cast<S>(integer_end_v<T>);
      fits = value >= low && value < high;  // false for NaN
    } else if constexpr (std::is_integral_v<S>) {
      fits = std::in_range<T>(value);
    }
    if (!fits) {
      char text[160];
      std::snprintf(text, sizeof text, "%.17g does not fit %s %d-bit %sinteger tensor (range %lld to %lld)",
                    static_cast<double>(value), sizeof(T) == 1 ? "an" : "a", int(sizeof(T) * 8),
                    std::is_signed_v<T> ? "" : "unsigned ", static_cast<long long>(std::numeric_limits<T>::min()),
                    static_cast<long long>(std::numeric_limits<T>::max()));
      throw Error(std::string("et: ") + what + ": " + text);
    }
  }
  return static_cast<T>(value);
}

}  // namespace detail
}  // namespace et
