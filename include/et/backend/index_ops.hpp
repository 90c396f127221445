// Internal (ops/index.hpp, ops/scan.hpp): the element arithmetic the CPU loops and the CUDA
// kernels of scatter_add, cumsum and sort share.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "et/config.hpp"
#include "et/types.hpp"

namespace et::detail {

/// scatter_add over the coordinates of an index of rank R: element i (row-major in the
/// index's shape) adds src at its coordinate into out at that coordinate with the axis'
/// replaced by the index there.
template <int R>
struct ScatterGeometry {
  std::int64_t count = 0;        // elements of the index
  std::int64_t axis_stride = 0;  // the output's along the axis
  std::int64_t extents[R] = {};
  std::int64_t index_strides[R] = {};
  std::int64_t src_strides[R] = {};
  std::int64_t out_strides[R] = {};  // 0 along the axis

  /// Where element i reads its index and its source value.
  ET_HD void offsets(std::int64_t i, std::int64_t& at_index, std::int64_t& at_src, std::int64_t& at_out) const {
    at_index = at_src = at_out = 0;
    for (int d = R - 1; d >= 0; --d) {
      const std::int64_t c = i % extents[d];
      i /= extents[d];
      at_index += c * index_strides[d];
      at_src += c * src_strides[d];
      at_out += c * out_strides[d];
    }
  }
};

/// What cumsum adds in and gives: floating types keep their type (half and bfloat16 add
/// in float), integers and bool give int64 (as PyTorch).
template <class T>
using cumsum_t = std::conditional_t<is_floating_v<T>, T, std::int64_t>;

/// An unsigned integer whose order is the sort order of v (sorts_before): two's complement
/// and IEEE bits turned so that unsigned comparison orders them, every NaN the greatest
/// and -0 equal to +0. 16-bit floats compare as the floats they widen to, exactly.
template <class T>
ET_HD auto ordered_key(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<std::uint8_t>(v);
  } else if constexpr (std::is_unsigned_v<T>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<U>(static_cast<U>(v) ^ (U{1} << (sizeof(T) * 8 - 1)));
  } else {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    using U = std::conditional_t<std::is_same_v<T, double>, std::uint64_t, std::uint32_t>;
    F f = static_cast<F>(static_cast<compute_t<T>>(v));
    if (f != f) return static_cast<U>(~U{0});
    if (f == F(0)) f = F(0);  // -0 as +0
    U bits;
    std::memcpy(&bits, &f, sizeof(bits));
    constexpr U sign = U{1} << (sizeof(U) * 8 - 1);
    return static_cast<U>(bits & sign ? ~bits : bits | sign);
  }
}

/// Sort order with NaN greater than every number (last ascending, first descending, as
/// PyTorch); equal keys keep their order.
template <class V>
ET_HD bool sorts_before(V a, V b, bool descending) {
  if constexpr (std::is_floating_point_v<V>) {
    if (a != a) return descending && b == b;  // NaN: before any number only when descending
    if (b != b) return !descending;
  }
  return descending ? b < a : a < b;
}

}  // namespace et::detail
