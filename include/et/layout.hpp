// Shapes, strides and NumPy broadcasting: host-side arithmetic on extents.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "et/runtime/error.hpp"

namespace et {

/// Extents of a rank-R tensor, outermost first.
template <int R>
using Shape = std::array<std::int64_t, R>;

/// "[2, 3, 4]"
template <std::size_t R>
std::string format_shape(const std::array<std::int64_t, R>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d != R; ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

namespace detail {

/// Element count of a shape; throws ShapeError for a negative extent or a count past int64.
template <std::size_t R>
std::int64_t checked_numel(const std::array<std::int64_t, R>& shape) {
  std::int64_t count = 1;
  for (std::size_t d = 0; d != R; ++d) {
    if (shape[d] < 0)
      throw ShapeError("et: negative extent " + std::to_string(shape[d]) + " at axis " + std::to_string(d) +
                       " of shape " + format_shape(shape));
  }
  for (std::size_t d = 0; d != R; ++d) {
    if (shape[d] == 0) return 0;
  }
  for (std::size_t d = 0; d != R; ++d) {
    if (count > std::numeric_limits<std::int64_t>::max() / shape[d])
      throw ShapeError("et: shape " + format_shape(shape) + " has more elements than fit in 64 bits");
    count *= shape[d];
  }
  return count;
}

template <std::size_t R>
std::array<std::int64_t, R> contiguous_strides(const std::array<std::int64_t, R>& shape) {
  std::array<std::int64_t, R> strides{};
  std::int64_t step = 1;
  for (std::size_t d = R; d-- > 0;) {
    strides[d] = step;
    if (d > 0 && __builtin_mul_overflow(step, shape[d] > 0 ? shape[d] : 1, &step))
      throw ShapeError("et: the strides of shape " + format_shape(shape) + " do not fit in 64 bits");
  }
  return strides;
}

/// Row-major contiguity; axes of extent 1 may carry any stride, and a layout without
/// elements is contiguous whatever its strides (as in PyTorch).
template <std::size_t R>
bool is_contiguous_layout(const std::array<std::int64_t, R>& shape, const std::array<std::int64_t, R>& strides) {
  for (std::size_t d = 0; d != R; ++d)
    if (shape[d] == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t d = R; d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

/// NumPy broadcasting of two shapes of possibly different ranks (trailing axes aligned).
template <std::size_t A, std::size_t B>
auto broadcast_shape(const std::array<std::int64_t, A>& a, const std::array<std::int64_t, B>& b) {
  constexpr std::size_t R = A > B ? A : B;
  std::array<std::int64_t, R> out{};
  for (std::size_t k = 0; k != R; ++k) {  // k counts from the last axis
    const std::int64_t ea = std::cmp_less(k, A) ? a[A - 1 - k] : 1;
    const std::int64_t eb = std::cmp_less(k, B) ? b[B - 1 - k] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      throw ShapeError("et: shapes " + format_shape(a) + " and " + format_shape(b) +
                       " do not broadcast: axis " + std::to_string(-static_cast<long>(k) - 1) + " has extents " +
                       std::to_string(ea) + " and " + std::to_string(eb));
    out[R - 1 - k] = ea == 1 ? eb : ea;
  }
  return out;
}

/// Strides of an operand read in the index space of a broadcast result of rank OutR:
/// missing leading axes and stretched size-1 axes get stride 0.
template <std::size_t OutR, std::size_t R>
std::array<std::int64_t, OutR> broadcast_strides(const std::array<std::int64_t, R>& shape,
                                                 const std::array<std::int64_t, R>& strides,
                                                 const std::array<std::int64_t, OutR>& out_shape) {
  static_assert(R <= OutR, "et: an operand cannot have a higher rank than the result it is read into");
  std::array<std::int64_t, OutR> out{};
  for (std::size_t k = 0; k != R; ++k) {
    const std::size_t d = R - 1 - k, od = OutR - 1 - k;
    out[od] = (shape[d] == 1 && out_shape[od] != 1) ? 0 : strides[d];
  }
  return out;
}

/// How a broadcast operand maps the output's row-major linear index i to its own offset,
/// (i / div) % mod, when its (broadcast) strides are zeros, then a contiguous block, then
/// zeros, from the last axis out (axes of extent 1 aside): a row vector added to a matrix
/// has div 1, a column vector div = the row length, a per-channel bias over N x C x H x W
/// div = H * W and mod = C. `mod` 0: the operand does not read that way.
struct LinearWrap {
  std::int64_t div = 1, mod = 0;
};
template <std::size_t R>
LinearWrap linear_wrap(const std::array<std::int64_t, R>& shape, const std::array<std::int64_t, R>& strides) {
  LinearWrap wrap;
  std::int64_t block = 1;  // the contiguous block's extent so far
  int phase = 0;           // 0: trailing zeros, 1: the block, 2: leading zeros
  for (std::size_t k = 0; k != R; ++k) {
    const std::size_t d = R - 1 - k;
    if (shape[d] == 1) continue;
    if (strides[d] == 0) {
      if (phase == 0) wrap.div *= shape[d];
      else phase = 2;
    } else if (phase <= 1 && strides[d] == block) {
      phase = 1;
      block *= shape[d];
    } else {
      return {};
    }
  }
  wrap.mod = block;
  return wrap;
}

/// True when an operand with this wrap reads other than the output (a broadcast), within
/// the 32-bit index arithmetic of readers.hpp.
template <std::size_t R>
bool wraps(const LinearWrap& wrap, const std::array<std::int64_t, R>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t e : shape) n *= e;  // the caller checked the count
  return wrap.mod > 0 && !(wrap.div == 1 && wrap.mod == n) && n <= std::int64_t{0xffffffff};
}

template <std::size_t R>
[[noreturn]] void throw_reach_overflow(const char* operation, const std::array<std::int64_t, R>& shape,
                                       const std::array<std::int64_t, R>& strides) {
  throw ShapeError("et: " + (operation ? std::string(operation) + ": " : std::string()) + "shape " +
                   format_shape(shape) + " with strides " + format_shape(strides) +
                   " reaches more bytes than fit in 64 bits");
}

/// Largest element offset reachable through a layout (strides are non-negative; axes of
/// extent 0 count as extent 1). The one place a layout's reach is computed: throws
/// ShapeError, naming `operation` when given, where it passes int64.
template <std::size_t R>
std::int64_t max_offset(const std::array<std::int64_t, R>& shape, const std::array<std::int64_t, R>& strides,
                        const char* operation = nullptr) {
  std::int64_t offset = 0, step = 0;
  for (std::size_t d = 0; d != R; ++d)
    if (__builtin_mul_overflow(shape[d] > 0 ? shape[d] - 1 : 0, strides[d], &step) ||
        __builtin_add_overflow(offset, step, &offset))
      throw_reach_overflow(operation, shape, strides);
  return offset;
}

/// Bytes from a layout's first element to the end of its last, for elements of
/// `element_size` bytes (0 without elements). Throws ShapeError where they pass int64, as
/// PyTorch's storage-size check does.
template <std::size_t R>
std::int64_t storage_bytes(const std::array<std::int64_t, R>& shape, const std::array<std::int64_t, R>& strides,
                           std::int64_t element_size, const char* operation = nullptr) {
  for (std::size_t d = 0; d != R; ++d)
    if (shape[d] == 0) return 0;
  std::int64_t elements = 0, bytes = 0;
  if (__builtin_add_overflow(max_offset(shape, strides, operation), 1, &elements) ||
      __builtin_mul_overflow(elements, element_size, &bytes))
    throw_reach_overflow(operation, shape, strides);
  return bytes;
}

/// Normalizes a possibly negative axis; throws ShapeError naming the rank.
/// `operation` and `shape`, when given, name the call and its operand in the message.
inline int normalize_axis(int axis, int rank, const char* operation = nullptr, const std::string& shape = {}) {
  const int normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    throw ShapeError("et: " + (operation ? std::string(operation) + ": " : std::string()) + "axis " +
                     std::to_string(axis) + " is out of range for " +
                     (shape.empty() ? std::string("a tensor") : "shape " + shape) + " of rank " + std::to_string(rank) +
                     " (axes " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
  return normalized;
}

}  // namespace detail
}  // namespace et
