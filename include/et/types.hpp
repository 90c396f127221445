// Element types and the promotion rules for mixed operands (PyTorch's):
//   bool < int32 < int64 < float < double;
//   an integer or bool combined with a floating type gives that floating type;
//   a plain C++ scalar never widens a tensor of the same category
//   (float tensor * 2.0 stays float, int32 tensor + 1L stays int32), but a
//   floating scalar lifts an integer tensor to float (PyTorch's default dtype);
//   math functions (exp, sqrt, ...) and true division of integers give float.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace et {

template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, std::int32_t> ||
                  std::same_as<T, std::int64_t> || std::same_as<T, bool>;

/// A plain C++ arithmetic value that can appear in an expression beside tensors.
template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>>;

namespace detail {

template <class T>
constexpr int type_rank() {
  if constexpr (std::is_same_v<T, bool>) return 0;
  else if constexpr (std::is_same_v<T, std::int32_t>) return 1;
  else if constexpr (std::is_same_v<T, std::int64_t>) return 2;
  else if constexpr (std::is_same_v<T, float>) return 3;
  else return 4;
}

template <class A, class B>
using promote_t = std::conditional_t<(type_rank<A>() >= type_rank<B>()), A, B>;

/// The type a math function computes in: float for integers and bool, else itself.
template <class T>
using floating_t = std::conditional_t<std::is_floating_point_v<T>, T, float>;

/// The element type a C++ scalar S takes when it meets a tensor of element type T.
template <class T, class S>
using scalar_type_t = std::conditional_t<
    std::is_floating_point_v<S>, std::conditional_t<std::is_floating_point_v<T>, T, float>,
    std::conditional_t<std::is_same_v<S, bool> || !std::is_same_v<T, bool>, T, std::int64_t>>;

/// The element type a C++ scalar has on its own (for et::full and friends).
template <class S>
using scalar_element_t =
    std::conditional_t<std::is_same_v<S, bool>, bool,
                       std::conditional_t<std::is_floating_point_v<S>, std::conditional_t<sizeof(S) <= 4, float, double>,
                                          std::conditional_t<sizeof(S) <= 4, std::int32_t, std::int64_t>>>;

}  // namespace detail
}  // namespace et
