// Layout arithmetic of the no-copy views (view, reshape, transpose, permute, slice,
// select, unsqueeze, squeeze, expand, and indexing several axes at once with et::range):
// host functions from one strided layout to another, with the checks and messages of bad
// input. Tensor's view methods
// (tensor.hpp) are thin wrappers; these functions are tested without any device.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <concepts>
#include <string>
#include <type_traits>
#include <utility>

#include "et/layout.hpp"
#include "et/runtime/error.hpp"

namespace et::detail {

/// Where a tensor's elements are: element (i0, i1, ...) of the tensor is element
/// offset + i0 * strides[0] + i1 * strides[1] + ... of its storage.
template <std::size_t R>
struct StridedLayout {
  std::array<std::int64_t, R> shape{};
  std::array<std::int64_t, R> strides{};
  std::int64_t offset = 0;
};

/// A braced list of extents or axes as a std::array.
template <class I, std::size_t N>
std::array<I, N> as_array(const I (&values)[N]) {
  std::array<I, N> out{};
  for (std::size_t d = 0; d != N; ++d) out[d] = values[d];
  return out;
}

/// "[1, 0, 2]" for a list of axes.
template <std::size_t N>
std::string format_axes(const std::array<int, N>& axes) {
  std::array<std::int64_t, N> wide{};
  for (std::size_t d = 0; d != N; ++d) wide[d] = axes[d];
  return format_shape(wide);
}

/// A possibly negative axis of a tensor of shape `shape`, normalized to [0, rank).
/// `rank` is R, except for unsqueeze, whose axis indexes the result (rank R + 1).
/// Throws ShapeError naming the operation, the axis and the shape.
template <std::size_t R>
int view_axis(const char* operation, int axis, const std::array<std::int64_t, R>& shape, int rank = int(R)) {
  const int normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    throw ShapeError(std::string("et: ") + operation + ": axis " + std::to_string(axis) +
                     " is out of range for a tensor of shape " + format_shape(shape) +
                     (rank == 0 ? std::string(" (it has no axes)")
                                : " (valid axes are " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")"));
  return normalized;
}

/// Resolves a requested shape for view()/reshape() of a tensor of shape `from`: at most
/// one extent may be -1 (inferred from the element count), the others must be >= 0,
/// and the element counts must agree.
template <std::size_t N, std::size_t R>
std::array<std::int64_t, N> infer_view_shape(const char* operation, const std::array<std::int64_t, N>& requested,
                                             const std::array<std::int64_t, R>& from) {
  const std::int64_t count = checked_numel(from);
  int inferred = -1;
  bool valid = true;
  std::array<std::int64_t, N> shape = requested;
  for (std::size_t d = 0; d != N; ++d) {
    if (requested[d] == -1) {
      if (inferred >= 0)
        throw ShapeError(std::string("et: ") + operation + ": only one extent can be inferred, but shape " +
                         format_shape(requested) + " has more than one -1");
      inferred = int(d);
      shape[d] = 1;
    } else if (requested[d] < 0) {
      valid = false;
    }
  }
  const auto fail = [&](const std::string& why) {
    return ShapeError(std::string("et: ") + operation + ": shape " + format_shape(requested) +
                      " is invalid for a tensor of shape " + format_shape(from) + " (" + std::to_string(count) +
                      " elements)" + why);
  };
  if (!valid) throw fail(": extents must be >= 0, or -1 for one inferred extent");
  const std::int64_t known = checked_numel(shape);
  if (inferred >= 0) {
    if (known == 0) throw fail(": the -1 is ambiguous when the other extents hold no elements");
    if (count % known != 0) throw fail("");
    shape[std::size_t(inferred)] = count / known;
  } else if (known != count) {
    throw fail("");
  }
  return shape;
}

/// Strides that read a tensor of shape `shape` and strides `strides` as `new_shape`
/// (same element count) without moving data, or nothing when no such strides exist.
/// PyTorch's rule (computeStride in ATen's TensorUtils.cpp): split the old axes into
/// chunks that are contiguous among themselves; the new axes must split into chunks of
/// the same element counts, and each is laid out contiguously inside its old chunk.
template <std::size_t N, std::size_t R>
std::optional<std::array<std::int64_t, N>> view_strides(const std::array<std::int64_t, R>& shape,
                                                        const std::array<std::int64_t, R>& strides,
                                                        const std::array<std::int64_t, N>& new_shape) {
  std::array<std::int64_t, N> new_strides{};
  if constexpr (R == 0) {
    new_strides.fill(1);  // one element: any strides reach it
    return new_strides;
  } else {
    const std::int64_t count = checked_numel(shape);
    if (count == 0) {  // no element is ever read: keep the strides, or take fresh ones
      if constexpr (N == R) {
        if (new_shape == shape) return strides;
      }
      return contiguous_strides(new_shape);
    }
    std::int64_t view_d = std::int64_t(N) - 1;
    std::int64_t chunk_base_stride = strides[R - 1];  // stride of the innermost axis of the chunk
    std::int64_t tensor_numel = 1, view_numel = 1;
    for (std::int64_t tensor_d = std::int64_t(R) - 1; tensor_d >= 0; --tensor_d) {
      tensor_numel *= shape[std::size_t(tensor_d)];
      const bool chunk_ends = tensor_d == 0 || (shape[std::size_t(tensor_d - 1)] != 1 &&
                                                strides[std::size_t(tensor_d - 1)] != tensor_numel * chunk_base_stride);
      if (!chunk_ends) continue;
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[std::size_t(view_d)] == 1)) {
        new_strides[std::size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[std::size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[std::size_t(tensor_d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
    if (view_d != -1) return std::nullopt;
    return new_strides;
  }
}

/// view(): the same elements read as `requested` (one extent may be -1), or ShapeError
/// when the layout cannot be read that way without a copy.
template <std::size_t N, std::size_t R>
StridedLayout<N> view_layout(const StridedLayout<R>& from, const std::array<std::int64_t, N>& requested) {
  const auto shape = infer_view_shape("view()", requested, from.shape);
  const auto strides = view_strides(from.shape, from.strides, shape);
  if (!strides)
    throw ShapeError("et: view(): a tensor of shape " + format_shape(from.shape) + " and strides " +
                     format_shape(from.strides) + " cannot be viewed as shape " + format_shape(shape) +
                     " without copying; use reshape(), which copies when it must");
  return {shape, *strides, from.offset};
}

/// transpose(a, b): axes a and b swapped.
template <std::size_t R>
StridedLayout<R> transpose_layout(StridedLayout<R> layout, int a, int b) {
  const auto i = std::size_t(view_axis("transpose()", a, layout.shape));
  const auto j = std::size_t(view_axis("transpose()", b, layout.shape));
  std::swap(layout.shape[i], layout.shape[j]);
  std::swap(layout.strides[i], layout.strides[j]);
  return layout;
}

/// permute(axes): axis k of the result is axis axes[k] of the source; `axes` must name
/// every axis exactly once (negative axes count from the end).
template <std::size_t R>
StridedLayout<R> permute_layout(const StridedLayout<R>& from, const std::array<int, R>& axes) {
  StridedLayout<R> out{{}, {}, from.offset};
  std::array<bool, R> used{};
  for (std::size_t k = 0; k != R; ++k) {
    const auto source = std::size_t(view_axis("permute()", axes[k], from.shape));
    if (used[source])
      throw ShapeError("et: permute(): axes " + format_axes(axes) + " are not a permutation of the axes of a tensor of shape " +
                       format_shape(from.shape) + ": axis " + std::to_string(source) + " appears more than once");
    used[source] = true;
    out.shape[k] = from.shape[source];
    out.strides[k] = from.strides[source];
  }
  return out;
}

/// slice(axis, begin, end, step): elements begin, begin + step, ... before end along one
/// axis, ceil((end - begin) / step) of them. Negative begin and end count from the end
/// (Python); then 0 <= begin <= end <= extent and step >= 1 must hold (no clamping).
template <std::size_t R>
StridedLayout<R> slice_layout(StridedLayout<R> layout, int axis, std::int64_t begin, std::int64_t end,
                              std::int64_t step) {
  const auto d = std::size_t(view_axis("slice()", axis, layout.shape));
  const std::int64_t extent = layout.shape[d];
  const std::string where = "axis " + std::to_string(axis) + " of a tensor of shape " + format_shape(layout.shape);
  if (step < 1) throw ShapeError("et: slice(): step must be at least 1, got " + std::to_string(step) + " (" + where + ")");
  const std::int64_t first = begin < 0 ? begin + extent : begin;
  const std::int64_t last = end < 0 ? end + extent : end;
  if (first < 0 || first > last || last > extent)
    throw ShapeError("et: slice(): begin " + std::to_string(begin) + " and end " + std::to_string(end) +
                     " are out of range for " + where + ": they must satisfy 0 <= begin <= end <= " +
                     std::to_string(extent) + " (negative values count from the end)");
  layout.offset += first * layout.strides[d];
  layout.shape[d] = last == first ? 0 : 1 + (last - first - 1) / step;
  if (layout.shape[d] > 1) layout.strides[d] *= step;  // below 2 elements the stride is never used
  return layout;
}

/// select(axis, index): the slice at `index` of one axis, with that axis removed.
template <std::size_t R>
StridedLayout<R - 1> select_layout(const StridedLayout<R>& from, int axis, std::int64_t index) {
  static_assert(R >= 1, "et: select() needs a tensor of rank 1 or more");
  const auto d = std::size_t(view_axis("select()", axis, from.shape));
  const std::int64_t extent = from.shape[d];
  const std::int64_t position = index < 0 ? index + extent : index;
  if (position < 0 || position >= extent)
    throw ShapeError("et: select(): index " + std::to_string(index) + " is out of range for axis " + std::to_string(axis) +
                     " of a tensor of shape " + format_shape(from.shape) + " (extent " + std::to_string(extent) + ")");
  StridedLayout<R - 1> out{{}, {}, from.offset + position * from.strides[d]};
  for (std::size_t k = 0, source = 0; k != R - 1; ++k, ++source) {
    if (source == d) ++source;
    out.shape[k] = from.shape[source];
    out.strides[k] = from.strides[source];
  }
  return out;
}

}  // namespace et::detail

namespace et {

/// One axis of an index t(...) (Tensor::operator()) that stays an axis: its elements begin,
/// begin + step, ... before end, as Python's x[begin:end:step]; negative bounds count from
/// the end. et::range() is the whole axis, et::range(b) runs from b to the end.
struct Range {
  std::int64_t begin = 0, end = 0, step = 1;
  bool to_end = true;  ///< end is the axis's extent (range() and range(b))
};
constexpr Range range() { return {}; }
constexpr Range range(std::int64_t begin) { return {begin, 0, 1, true}; }
constexpr Range range(std::int64_t begin, std::int64_t end, std::int64_t step = 1) { return {begin, end, step, false}; }

/// What t(...) takes per axis: an et::Range (keeps the axis) or an integer (selects one
/// element along it and drops the axis; negative counts from the end).
template <class X>
concept IndexArgument = std::same_as<std::remove_cvref_t<X>, Range> || std::integral<std::remove_cvref_t<X>>;

}  // namespace et

namespace et::detail {

/// How many of an index's arguments are integers (the axes the index drops).
template <class... Args>
inline constexpr int selected_axes = (0 + ... + int(std::integral<std::remove_cvref_t<Args>>));

/// "range(1, -1)", "range(2)", "range()" or "3": an index argument as the user wrote it.
inline std::string describe_index(const Range& r) {
  if (r.to_end) return r.begin == 0 ? "range()" : "range(" + std::to_string(r.begin) + ")";
  return "range(" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
         (r.step != 1 ? ", " + std::to_string(r.step) : "") + ")";
}
template <std::integral I>
std::string describe_index(I i) {
  return std::to_string(i);
}

/// t(args...): for each argument in order, its axis sliced (a Range) or selected (an
/// integer, dropping the axis); axes past the arguments are kept whole. Throws ShapeError
/// naming the axis, the argument and the shape for a bound out of range or a step below 1.
template <std::size_t R, class... Args>
StridedLayout<R - selected_axes<Args...>> index_layout(const StridedLayout<R>& from, const Args&... args) {
  static_assert(sizeof...(Args) <= R, "et: t(...) takes at most one index per axis");
  StridedLayout<R - selected_axes<Args...>> out{{}, {}, from.offset};
  std::size_t d = 0, kept = 0;
  const auto fail = [&](const std::string& argument, const std::string& why) {
    return ShapeError("et: t(...): " + argument + " at axis " + std::to_string(d) + " of a tensor of shape " +
                      format_shape(from.shape) + ": " + why);
  };
  const auto one = [&](const auto& arg) {
    const std::int64_t extent = from.shape[d], stride = from.strides[d];
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(arg)>, Range>) {
      const std::int64_t first = arg.begin < 0 ? arg.begin + extent : arg.begin;
      const std::int64_t last = arg.to_end ? extent : arg.end < 0 ? arg.end + extent : arg.end;
      if (arg.step < 1) throw fail(describe_index(arg), "the step must be at least 1");
      if (first < 0 || first > last || last > extent)
        throw fail(describe_index(arg), "out of range: 0 <= begin <= end <= " + std::to_string(extent) +
                                            " must hold (negative bounds count from the end)");
      out.offset += first * stride;
      out.shape[kept] = last == first ? 0 : 1 + (last - first - 1) / arg.step;
      out.strides[kept] = out.shape[kept] > 1 ? stride * arg.step : stride;  // within the reach: no overflow
      ++kept;
    } else {
      const auto index = static_cast<std::int64_t>(arg);
      const std::int64_t position = index < 0 ? index + extent : index;
      if (position < 0 || position >= extent)
        throw fail(describe_index(arg), "out of range for an axis of extent " + std::to_string(extent));
      out.offset += position * stride;
    }
    ++d;
  };
  (one(args), ...);
  for (; d < R; ++d, ++kept) {
    out.shape[kept] = from.shape[d];
    out.strides[kept] = from.strides[d];
  }
  return out;
}

/// unsqueeze(axis): a new axis of extent 1 at position `axis` of the result (in
/// [-(R + 1), R]), strided as PyTorch strides it.
template <std::size_t R>
StridedLayout<R + 1> unsqueeze_layout(const StridedLayout<R>& from, int axis) {
  const auto d = std::size_t(view_axis("unsqueeze()", axis, from.shape, int(R) + 1));
  StridedLayout<R + 1> out{{}, {}, from.offset};
  for (std::size_t k = 0, source = 0; k != R + 1; ++k) {
    if (k == d) {
      out.shape[k] = 1;
      out.strides[k] = d != R ? from.shape[d] * from.strides[d] : 1;  // d <= R; not `<`: R may be 0
    } else {
      out.shape[k] = from.shape[source];
      out.strides[k] = from.strides[source];
      ++source;
    }
  }
  return out;
}

/// squeeze(axis): removes one axis, which must have extent 1.
template <std::size_t R>
StridedLayout<R - 1> squeeze_layout(const StridedLayout<R>& from, int axis) {
  static_assert(R >= 1, "et: squeeze() needs a tensor of rank 1 or more");
  const auto d = std::size_t(view_axis("squeeze()", axis, from.shape));
  if (from.shape[d] != 1)
    throw ShapeError("et: squeeze(): axis " + std::to_string(axis) + " of a tensor of shape " + format_shape(from.shape) +
                     " has extent " + std::to_string(from.shape[d]) + "; only an axis of extent 1 can be removed");
  StridedLayout<R - 1> out{{}, {}, from.offset};
  for (std::size_t k = 0, source = 0; k != R - 1; ++k, ++source) {
    if (source == d) ++source;
    out.shape[k] = from.shape[source];
    out.strides[k] = from.strides[source];
  }
  return out;
}

/// expand(target): NumPy broadcasting of the tensor to `target` (rank N >= R, trailing
/// axes aligned). Extent-1 axes and new leading axes stretch with stride 0; -1 keeps an
/// existing extent. Every other axis must already have its target extent.
template <std::size_t N, std::size_t R>
StridedLayout<N> expand_layout(const StridedLayout<R>& from, const std::array<std::int64_t, N>& target) {
  static_assert(N >= R, "et: expand() cannot lower the rank; use select(), squeeze() or a reduction");
  StridedLayout<N> out{{}, {}, from.offset};
  for (std::size_t k = 0; k != N; ++k) {  // k counts from the last axis
    const std::size_t t = N - 1 - k;
    const bool existing = k < R;
    const std::size_t d = existing ? R - 1 - k : 0;
    std::int64_t extent = existing ? from.shape[d] : 1;
    std::int64_t stride = existing ? from.strides[d] : (t + 1 < N ? out.shape[t + 1] * out.strides[t + 1] : 1);
    std::int64_t wanted = target[t];
    if (wanted == -1) {
      if (!existing)
        throw ShapeError("et: expand(): target shape " + format_shape(target) + " has -1 at axis " + std::to_string(t) +
                         ", a new leading axis of a tensor of shape " + format_shape(from.shape) +
                         "; -1 can only keep an existing extent");
      wanted = extent;
    } else if (wanted < 0) {
      throw ShapeError("et: expand(): target shape " + format_shape(target) + " has the negative extent " +
                       std::to_string(wanted) + " at axis " + std::to_string(t));
    }
    if (wanted != extent) {
      if (extent != 1)
        throw ShapeError("et: expand(): axis " + std::to_string(d) + " of a tensor of shape " + format_shape(from.shape) +
                         " has extent " + std::to_string(extent) + " and cannot be expanded to " + std::to_string(wanted) +
                         " (target shape " + format_shape(target) + "); only axes of extent 1 stretch");
      extent = wanted;
      stride = 0;
    }
    out.shape[t] = extent;
    out.strides[t] = stride;
  }
  (void)checked_numel(out.shape);  // a view must still be countable: numel() is int64
  return out;
}

/// Throws et::Error when two indices of a layout reach the same element (stride 0 on an
/// axis of extent > 1, as expand() makes): writing such a tensor would race. Reading is fine.
/// A tensor of no elements has none that overlap, whatever its strides.
template <std::size_t R>
void check_no_internal_overlap(const std::array<std::int64_t, R>& shape, const std::array<std::int64_t, R>& strides) {
  for (const std::int64_t extent : shape)
    if (extent == 0) return;
  for (std::size_t d = 0; d != R; ++d) {
    if (shape[d] > 1 && strides[d] == 0)
      throw Error("et: cannot write into a tensor whose elements overlap in memory (shape " + format_shape(shape) +
                  ", strides " + format_shape(strides) + ": axis " + std::to_string(d) +
                  " has stride 0, as after expand()); write into a contiguous() copy instead");
  }
}

}  // namespace et::detail
