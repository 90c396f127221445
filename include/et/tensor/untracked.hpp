// Part of et/tensor.hpp, which includes it before the class (include et/tensor.hpp, not
// this): the views and copies of backward code, which record nothing. A gradient is never
// differentiated again, and recording them would compile the recording of every view a
// backward reaches into every program that records anything (the backward of a view, of a
// broadcast operand, a fused node's staging buffers, a gradient's accumulation).
#pragma once

#include <array>
#include <cstdint>

#include "et/layout.hpp"
#include "et/tensor/forward.hpp"
#include "et/views.hpp"

namespace et::detail {

template <class T, int R, class D>
StridedLayout<std::size_t(R)> layout_of(const Tensor<T, R, D>& t) {
  return {t.shape(), t.strides(), t.offset()};
}
/// `layout` over t's storage, recorded nowhere.
template <class T, int R, class D, std::size_t N>
Tensor<T, int(N), D> untracked_view(const Tensor<T, R, D>& t, const StridedLayout<N>& layout) {
  return Tensor<T, int(N), D>(t.storage(), layout.offset, layout.shape, layout.strides);
}
/// A contiguous copy of t, recorded nowhere.
template <class T, int R, class D>
Tensor<T, R, D> untracked_copy(const Tensor<T, R, D>& t) {
  Tensor<T, R, D> out;
  evaluate(out, t);
  return out;
}
/// t read as `shape`: a view where its layout allows, else a contiguous copy.
template <class T, int R, class D, std::size_t N>
Tensor<T, int(N), D> untracked_reshape(const Tensor<T, R, D>& t, const std::array<std::int64_t, N>& shape) {
  if (const auto strides = view_strides(t.shape(), t.strides(), shape))
    return untracked_view(t, StridedLayout<N>{shape, *strides, t.offset()});
  return untracked_view(untracked_copy(t), StridedLayout<N>{shape, contiguous_strides(shape), 0});
}

}  // namespace et::detail
