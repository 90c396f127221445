// Indexing by tensors of int64 indices: gather, index_select, embedding, flip read through
// one generator kernel each (the source element of every output coordinate, computed in
// place: any layout, every element type, every device); scatter_add adds into a copy of
// its input, with atomics on the GPU (backend/cpu/index.hpp, backend/cuda/index.hpp).
// Each is recorded for autograd (derivatives/index.hpp): the gradient of a gather is a
// scatter_add of the output's gradient, and that of a scatter_add's source a gather.
//
//   auto g = et::gather(x, 1, idx);            // g[i][j] = x[i][idx[i][j]]
//   auto s = et::index_select(x, 0, rows);     // the rows `rows` (int64 [n]) of x
//   auto e = et::embedding(table, tokens);     // table [V, E], tokens int64 [B, L] -> [B, L, E]
//   auto f = et::flip(x, {0, 1});              // reversed along axes 0 and 1
//   auto y = et::scatter_add(x, 0, idx, src);  // y = x; y[idx[i][j]][j] += src[i][j]
//
// Indices are checked against their axis' extent on the host before anything runs (one
// reduction and a wait for it): an index out of range is an et::Error, never a read or a
// write out of bounds. While a CUDA graph is captured nothing may wait, so gather,
// index_select and embedding are not checked there: an index out of range reads NaN (0 for
// integers, false for bool), never memory out of bounds (as a captured cross_entropy's
// label out of range makes the loss NaN).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "et/backend/cpu/index.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/reduce.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/index.hpp"
#endif

namespace et {

namespace detail {

/// Element i (row-major in the output's shape) of a gather: the source element at the
/// output's coordinate, the coordinate along `axis` replaced by the index there (with an
/// index tensor), axes reversed by negative strides (flip).
template <class T, int R>
struct GatherGenerator {
  using value_type = T;
  const T* source;
  const std::int64_t* index;  // null: no index
  std::int64_t extents[R];
  std::int64_t source_strides[R];  // per output axis; with an index, 0 along the axis
  std::int64_t index_strides[R];
  std::int64_t axis_stride;  // the source's along the axis
  std::int64_t axis_extent;  // the source's along the axis: an index outside reads NaN or 0
  ET_HD T operator()(std::int64_t i) const {
    std::int64_t at = 0, at_index = 0;
    for (int d = R - 1; d >= 0; --d) {
      const std::int64_t c = i % extents[d];
      i /= extents[d];
      at += c * source_strides[d];
      at_index += c * index_strides[d];
    }
    if (index) {
      const std::int64_t k = index[at_index];
      if (k < 0 || k >= axis_extent) return outside();
      at += k * axis_stride;
    }
    return source[at];
  }
  ET_HD static T outside() {
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) return std::numeric_limits<T>::quiet_NaN();
    else return T{};
  }
};

template <class T, int R, class D>
void require_defined_input(const Tensor<T, R, D>& t, const char* op) {
  if (!t.defined()) throw Error(std::string("et: ") + op + " on an undefined (default-constructed) tensor");
}

template <class T, int R, class D>
GatherGenerator<T, R> gather_generator(const Tensor<T, R, D>& x, const std::type_identity_t<Shape<R>>& out_shape) {
  GatherGenerator<T, R> gen{x.data(), nullptr, {}, {}, {}, 0, 0};
  for (int d = 0; d < R; ++d) {
    gen.extents[d] = out_shape[d];
    gen.source_strides[d] = x.strides()[d];
  }
  return gen;
}

/// Throws unless every index lies in [0, extent) (waits for the device). A gather (`reads`)
/// is not checked while a CUDA graph is captured: it reads NaN or 0 for such an index.
template <int R, class D>
void check_index_range(const Tensor<std::int64_t, R, D>& index, std::int64_t extent, const char* op, int axis,
                       bool reads) {
  if (index.numel() == 0 || (reads && capturing_on<D>())) return;
  const std::int64_t lo = min(index).item(), hi = max(index).item();
  if (lo < 0 || hi >= extent)
    throw Error(std::string("et: ") + op + ": indices range over [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "], outside [0, " + std::to_string(extent) + ") of axis " + std::to_string(axis));
}

template <class T, int R, class D>
Tensor<T, R, D> gather_unchecked(const Tensor<T, R, D>& x, int a, const Tensor<std::int64_t, R, D>& index) {
  GatherGenerator<T, R> gen = gather_generator(x, index.shape());
  gen.index = index.data();
  gen.axis_stride = x.strides()[a];
  gen.axis_extent = x.size(a);
  gen.source_strides[a] = 0;
  for (int d = 0; d < R; ++d) gen.index_strides[d] = index.strides()[d];
  Tensor<T, R, D> out = generate<T, R, D>(index.shape(), gen);
  note_stream_uses(x, index);
  return out;
}

template <class T, int R, class D>
Tensor<T, R, D> scatter_add_unchecked(const Tensor<T, R, D>& x, int a, const Tensor<std::int64_t, R, D>& index,
                                      const Tensor<T, R, D>& src) {
  // A writable copy laid out as x when it is contiguous (clone), else compact: one copy.
  Tensor<T, R, D> out = x.is_contiguous() ? x.clone() : x.contiguous();
  ScatterGeometry<R> g{};
  g.count = index.numel();
  g.axis_stride = out.strides()[a];
  for (int d = 0; d < R; ++d) {
    g.extents[d] = index.size(d);
    g.index_strides[d] = index.strides()[d];
    g.src_strides[d] = src.strides()[d];
    g.out_strides[d] = d == a ? 0 : out.strides()[d];
  }
  if (g.count > 0) scatter_add_into(backend<D>, out.data(), index.data(), src.data(), g);
  note_stream_uses(out, index, src);
  return out;
}

/// x reversed along the (distinct, normalized) axes: the source read with those strides
/// negated, from the last element along each.
template <class T, int R, class D>
Tensor<T, R, D> flip_unchecked(const Tensor<T, R, D>& x, const std::vector<int>& axes) {
  GatherGenerator<T, R> gen = gather_generator(x, x.shape());
  for (int a : axes) {
    if (x.size(a) > 0) gen.source += (x.size(a) - 1) * x.strides()[a];
    gen.source_strides[a] = -gen.source_strides[a];
  }
  Tensor<T, R, D> out = generate<T, R, D>(x.shape(), gen);
  note_stream_uses(x);
  return out;
}

template <class T, int R, class D, class DI>
int check_gather(const Tensor<T, R, D>& x, int axis, const Tensor<std::int64_t, R, DI>& index, const char* op,
                 bool reads) {
  static_assert(R >= 1, "et: gather, scatter_add and index_select index along an axis, which a 0-d tensor lacks");
  [[maybe_unused]] detail::same_devices<D, DI> check;
  require_defined_input(x, op);
  require_defined_input(index, op);
  const int a = normalize_axis(axis, R, op, format_shape(x.shape()));
  for (int d = 0; d < R; ++d)
    if (d != a && index.size(d) > x.size(d))
      throw ShapeError(std::string("et: ") + op + ": index of shape " + format_shape(index.shape()) +
                       " is longer than the input " + format_shape(x.shape()) + " along axis " + std::to_string(d));
  check_index_range(index, x.size(a), op, a, reads);
  return a;
}

/// index_select, its messages naming `op` (embedding reads a table through it).
template <class T, int R, class D>
Tensor<T, R, D> index_select_as(const char* op, const Tensor<T, R, D>& x, int axis,
                                const Tensor<std::int64_t, 1, D>& index) {
  require_defined_input(x, op);
  require_defined_input(index, op);
  const int a = normalize_axis(axis, R, op, format_shape(x.shape()));
  Shape<R> shape = x.shape(), along{};
  shape[a] = index.size(0);
  for (int d = 0; d < R; ++d) along[d] = d == a ? index.size(0) : 1;
  // The index along the axis, broadcast (stride 0) over the others: a gather.
  Tensor<std::int64_t, R, D> spread = index.reshape(along).expand(shape);
  check_index_range(index, x.size(a), op, a, true);
  Tensor<T, R, D> out = gather_unchecked(x, a, spread);
  record_gather(out, op, x, a, spread);
  return out;
}

}  // namespace detail

/// out[c] = x[c with c[axis] = index[c]]: the shape of `index` (int64, of x's rank, no
/// longer than x along the other axes). Differentiable in x.
template <class T, int R, class D, class DI>
Tensor<T, R, D> gather(const Tensor<T, R, D>& x, int axis, const Tensor<std::int64_t, R, DI>& index) {
  const int a = detail::check_gather(x, axis, index, "gather", true);
  Tensor<T, R, D> out = detail::gather_unchecked(x, a, index);
  detail::record_gather(out, "gather", x, a, index);
  return out;
}

/// y = a copy of x with y[c with c[axis] = index[c]] += src[c] for every coordinate c of
/// `index` (int64, of x's rank, no longer than src anywhere nor than x off the axis);
/// repeated indices add up. Differentiable in x and src.
template <class T, int R, class D, class DI, class DS>
Tensor<T, R, D> scatter_add(const Tensor<T, R, D>& x, int axis, const Tensor<std::int64_t, R, DI>& index,
                            const Tensor<T, R, DS>& src) {
  static_assert(!std::is_same_v<T, bool>, "et: scatter_add adds numbers; bool tensors have no addition");
  [[maybe_unused]] detail::same_devices<D, DS> check;
  detail::require_defined_input(src, "scatter_add");
  const int a = detail::check_gather(x, axis, index, "scatter_add", false);
  for (int d = 0; d < R; ++d)
    if (index.size(d) > src.size(d))
      throw ShapeError("et: scatter_add: index of shape " + format_shape(index.shape()) +
                       " is longer than the source " + format_shape(src.shape()) + " along axis " + std::to_string(d));
  Tensor<T, R, D> out = detail::scatter_add_unchecked(x, a, index, src);
  detail::record_scatter_add(out, x, src, a, index);
  return out;
}

/// The slices of x along `axis` at `index` (int64 [n]): x's shape with n along the axis.
/// Differentiable in x.
template <class T, int R, class D, class DI>
Tensor<T, R, D> index_select(const Tensor<T, R, D>& x, int axis, const Tensor<std::int64_t, 1, DI>& index) {
  static_assert(R >= 1, "et: index_select selects along an axis, which a 0-d tensor lacks");
  [[maybe_unused]] detail::same_devices<D, DI> check;
  if constexpr (std::is_same_v<D, DI> && R >= 1) return detail::index_select_as("index_select", x, axis, index);
  else return {};
}

/// The rows of `table` ([V, E]) at `indices` (int64, any shape S, each in [0, V)): shape
/// S + [E]. Differentiable in the table (its gradient adds up over repeated indices).
template <class T, class D, int R, class DI>
Tensor<T, R + 1, D> embedding(const Tensor<T, 2, D>& table, const Tensor<std::int64_t, R, DI>& indices) {
  [[maybe_unused]] detail::same_devices<D, DI> check;
  detail::require_defined_input(indices, "embedding");
  Shape<R + 1> shape{};
  for (int d = 0; d < R; ++d) shape[d] = indices.size(d);
  shape[R] = table.defined() ? table.size(1) : 0;
  if constexpr (std::is_same_v<D, DI>) {
    const auto flat = indices.reshape(std::array<std::int64_t, 1>{indices.numel()});
    return detail::index_select_as("embedding", table, 0, flat).reshape(shape);
  } else {
    return {};
  }
}

/// x reversed along each of `axes` (a new tensor). Differentiable.
template <class T, int R, class D>
Tensor<T, R, D> flip(const Tensor<T, R, D>& x, std::initializer_list<int> axes) {
  detail::require_defined_input(x, "flip");
  std::vector<int> normalized;
  for (int axis : axes) {
    const int a = detail::normalize_axis(axis, R, "flip", format_shape(x.shape()));
    for (int b : normalized)
      if (a == b) throw Error("et: flip: axis " + std::to_string(a) + " is named twice");
    normalized.push_back(a);
  }
  Tensor<T, R, D> out = detail::flip_unchecked(x, normalized);
  detail::record_flip(out, x, normalized);
  return out;
}
template <class T, int R, class D>
Tensor<T, R, D> flip(const Tensor<T, R, D>& x, int axis) {
  return flip(x, {axis});
}

}  // namespace et
