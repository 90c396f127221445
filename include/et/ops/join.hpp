// Joining and reshaping by copy: cat, stack, pad, one_hot. Each is a new tensor written
// through views with the library's own kernels (one copy kernel per input on a GPU), so it
// works on every device and element type, and is differentiable: the writes into views are
// recorded like any other (the gradient of each input is its slice of the output's).
//
//   auto c = et::cat({a, b}, 0);                 // [2, 3] and [4, 3] -> [6, 3]
//   auto s = et::stack({a, a}, 1);               // [2, 3] -> [2, 2, 3]
//   auto p = et::pad(x, {{{1, 1}, {0, 2}}});     // one {before, after} per axis, zeros around
//   auto h = et::one_hot(labels, 10);            // int64 [N] -> int64 [N, 10]
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "et/autograd/views.hpp"
#include "et/exec/assign.hpp"
#include "et/expr/operators.hpp"
#include "et/layout.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/reduce.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"

namespace et {

/// The tensors joined along `axis` (negative counts from the end): every other extent must
/// agree. Throws et::Error for no tensors or an undefined one, ShapeError for extents that
/// differ or an axis out of range.
template <class T, int R, class D>
Tensor<T, R, D> cat(const std::vector<Tensor<T, R, D>>& parts, int axis) {
  static_assert(R >= 1, "et: cat joins along an axis, which a 0-d tensor does not have (stack them instead)");
  if (parts.empty()) throw Error("et: cat of no tensors");
  const int a = detail::normalize_axis(axis, R, "cat", format_shape(parts.front().shape()));
  Shape<R> shape = parts.front().shape();
  shape[a] = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].defined()) throw Error("et: cat: tensor " + std::to_string(i) + " is undefined");
    for (int d = 0; d < R; ++d)
      if (d != a && parts[i].size(d) != parts.front().size(d))
        throw ShapeError("et: cat along axis " + std::to_string(a) + ": tensor " + std::to_string(i) +
                         " has shape " + format_shape(parts[i].shape()) + ", tensor 0 " +
                         format_shape(parts.front().shape()) + " (only axis " + std::to_string(a) + " may differ)");
    shape[a] += parts[i].size(a);
  }
  Tensor<T, R, D> out = empty<T>(D{}, shape);
  std::int64_t offset = 0;
  for (const auto& part : parts) {
    const std::int64_t n = part.size(a);
    if (n > 0) out.slice(a, offset, offset + n) = part;
    offset += n;
  }
  return out;
}
template <class T, int R, class D>
Tensor<T, R, D> cat(std::initializer_list<Tensor<T, R, D>> parts, int axis) {
  return cat(std::vector<Tensor<T, R, D>>(parts), axis);
}

/// The tensors (all of one shape) joined along a new axis `axis` (0 .. R; negative counts
/// from the end, -1 is a new last axis).
template <class T, int R, class D>
Tensor<T, R + 1, D> stack(const std::vector<Tensor<T, R, D>>& parts, int axis) {
  if (parts.empty()) throw Error("et: stack of no tensors");
  const int a = axis < 0 ? axis + R + 1 : axis;
  if (a < 0 || a > R)
    throw ShapeError("et: stack: axis " + std::to_string(axis) + " is out of range for tensors of rank " +
                     std::to_string(R) + " (a new axis goes at 0 .. " + std::to_string(R) + ")");
  std::vector<Tensor<T, R + 1, D>> expanded;
  expanded.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].defined()) throw Error("et: stack: tensor " + std::to_string(i) + " is undefined");
    if (parts[i].shape() != parts.front().shape())
      throw ShapeError("et: stack: tensor " + std::to_string(i) + " has shape " + format_shape(parts[i].shape()) +
                       ", tensor 0 " + format_shape(parts.front().shape()) + " (all must be equal)");
    expanded.push_back(parts[i].unsqueeze(a));
  }
  return cat(expanded, a);
}
template <class T, int R, class D>
Tensor<T, R + 1, D> stack(std::initializer_list<Tensor<T, R, D>> parts, int axis) {
  return stack(std::vector<Tensor<T, R, D>>(parts), axis);
}

/// x surrounded by `value`: widths[d] = {before, after} elements along axis d (>= 0).
template <class T, int R, class D>
Tensor<T, R, D> pad(const Tensor<T, R, D>& x, const std::array<std::array<std::int64_t, 2>, R>& widths,
                    T value = T(0)) {
  if (!x.defined()) throw Error("et: pad of an undefined tensor");
  Shape<R> shape = x.shape();
  for (int d = 0; d < R; ++d) {
    if (widths[d][0] < 0 || widths[d][1] < 0)
      throw ShapeError("et: pad: negative width {" + std::to_string(widths[d][0]) + ", " +
                       std::to_string(widths[d][1]) + "} at axis " + std::to_string(d) + " of a tensor of shape " +
                       format_shape(x.shape()));
    if (__builtin_add_overflow(shape[d], widths[d][0], &shape[d]) ||
        __builtin_add_overflow(shape[d], widths[d][1], &shape[d]))
      throw ShapeError("et: pad: the padded extent of axis " + std::to_string(d) + " does not fit in 64 bits");
  }
  Tensor<T, R, D> out = full<T>(D{}, shape, value);
  if constexpr (R == 0) {
    out.copy_(x);
  } else if (x.numel() > 0) {
    // A view of `out` itself first (a copy of the handle would take the recorded write in
    // its place), then views of that view.
    Tensor<T, R, D> inside = out.slice(0, widths[0][0], widths[0][0] + x.size(0));
    for (int d = 1; d < R; ++d) inside = inside.slice(d, widths[d][0], widths[d][0] + x.size(d));
    std::move(inside) = x;  // writes through the view (a named tensor assigned a tensor rebinds)
  }
  return out;
}

/// labels (int64, each in [0, classes)) as one-hot rows: an int64 tensor one rank higher
/// whose last axis has `classes` entries, 1 at each label. Throws et::Error for a label
/// out of range (reading the labels' minimum and maximum: it waits for the device).
template <int R, class D>
Tensor<std::int64_t, R + 1, D> one_hot(const Tensor<std::int64_t, R, D>& labels, std::int64_t classes) {
  if (!labels.defined()) throw Error("et: one_hot of undefined labels");
  if (classes < 0) throw ShapeError("et: one_hot: a negative number of classes, " + std::to_string(classes));
  if (labels.numel() > 0) {
    const std::int64_t lo = min(labels).item(), hi = max(labels).item();
    if (lo < 0 || hi >= classes)
      throw Error("et: one_hot: labels range over [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], outside [0, " + std::to_string(classes) + ")");
  }
  return cast<std::int64_t>(labels.unsqueeze(R) == arange<std::int64_t>(D{}, classes));
}

}  // namespace et
