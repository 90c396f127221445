// Part of et/tensor.hpp, which includes it after the class (include et/tensor.hpp, not
// this): the bodies of Tensor's view methods and contiguous() (their documentation is at
// the declarations). A view is another layout over the same storage, made by views.hpp's
// layout arithmetic; in grad mode it records how its gradient reaches the tensor it views
// (autograd/views.hpp). contiguous(), and reshape() where no view reads the layout, copy.
#pragma once

namespace et {

template <Element T, int Rank, Device D>
template <std::size_t N>
Tensor<T, int(N), D> Tensor<T, Rank, D>::view(const std::array<std::int64_t, N>& shape) const {
  require_defined("view()");
  return share_storage(detail::view_layout(detail::layout_of(*this), shape), "view()",
                       [shape = shape_](const auto& g) { return detail::untracked_reshape(g, shape); });
}

template <Element T, int Rank, Device D>
template <std::size_t N>
Tensor<T, int(N), D> Tensor<T, Rank, D>::reshape(const std::array<std::int64_t, N>& shape) const {
  require_defined("reshape()");
  const auto extents = detail::infer_view_shape("reshape()", shape, shape_);
  if (const auto strides = detail::view_strides(shape_, strides_, extents))
    return share_storage(detail::StridedLayout<N>{extents, *strides, offset_}, "reshape()",
                         [shape = shape_](const auto& g) { return detail::untracked_reshape(g, shape); });
  return contiguous().view(extents);  // not viewable, hence not contiguous: contiguous() copies
}

template <Element T, int Rank, Device D>
Tensor<T, Rank, D> Tensor<T, Rank, D>::permute(const std::array<int, Rank>& axes) const {
  require_defined("permute()");
  const auto layout = detail::permute_layout(detail::layout_of(*this), axes);  // checks the axes
  std::array<int, Rank> inverse{};
  for (int k = 0; k < Rank; ++k) inverse[static_cast<std::size_t>(detail::normalize_axis(axes[k], Rank))] = k;
  return share_storage(layout, "permute()", [inverse](const auto& g) {
    return detail::untracked_view(g, detail::permute_layout(detail::layout_of(g), inverse));
  });
}

template <Element T, int Rank, Device D>
Tensor<T, Rank, D> Tensor<T, Rank, D>::slice(int axis, std::int64_t begin, std::int64_t end, std::int64_t step) const {
  require_defined("slice()");
  return share_storage(detail::slice_layout(detail::layout_of(*this), axis, begin, end, step), "slice()",
                       [=, shape = shape_](const auto& g) {
                         Tensor base = zeros_like_shape(shape);
                         auto part = detail::untracked_view(base, detail::slice_layout(detail::layout_of(base), axis, begin, end, step));
                         detail::evaluate(part, g);
                         return base;
                       });
}

template <Element T, int Rank, Device D>
template <IndexArgument... Args>
auto Tensor<T, Rank, D>::operator()(const Args&... args) const {
  static_assert(int(sizeof...(Args)) <= Rank, "et: t(...) takes at most one index (et::range or an integer) per axis");
  if constexpr (int(sizeof...(Args)) <= Rank) {
    require_defined("t(...)");
    auto out = share_storage(detail::index_layout(detail::layout_of(*this), args...), "t(...)",
                             [=, shape = shape_](const auto& g) {
                               Tensor base = zeros_like_shape(shape);
                               auto part = detail::untracked_view(base, detail::index_layout(detail::layout_of(base), args...));
                               detail::evaluate(part, g);
                               return base;
                             });
    out.window_ = true;
    return out;
  }
}

template <Element T, int Rank, Device D>
auto Tensor<T, Rank, D>::select(int axis, std::int64_t index) const {
  static_assert(Rank >= 1, "et: select() needs a tensor of rank 1 or more: a rank-0 tensor has no axis");
  if constexpr (Rank >= 1) {
    require_defined("select()");
    return share_storage(detail::select_layout(detail::layout_of(*this), axis, index), "select()",
                         [=, shape = shape_](const auto& g) {
                           Tensor base = zeros_like_shape(shape);
                           auto part = detail::untracked_view(base, detail::select_layout(detail::layout_of(base), axis, index));
                           detail::evaluate(part, g);
                           return base;
                         });
  }
}

template <Element T, int Rank, Device D>
auto Tensor<T, Rank, D>::squeeze(int axis) const {
  static_assert(Rank >= 1, "et: squeeze() needs a tensor of rank 1 or more: a rank-0 tensor has no axis");
  if constexpr (Rank >= 1) {
    require_defined("squeeze()");
    return share_storage(detail::squeeze_layout(detail::layout_of(*this), axis), "squeeze()",
                         [axis](const auto& g) {
                           return detail::untracked_view(g, detail::unsqueeze_layout(detail::layout_of(g), axis));
                         });
  }
}

template <Element T, int Rank, Device D>
Tensor<T, Rank + 1, D> Tensor<T, Rank, D>::unsqueeze(int axis) const {
  require_defined("unsqueeze()");
  return share_storage(detail::unsqueeze_layout(detail::layout_of(*this), axis), "unsqueeze()",
                       [axis](const auto& g) {
                         return detail::untracked_view(g, detail::squeeze_layout(detail::layout_of(g), axis));
                       });
}

template <Element T, int Rank, Device D>
template <std::size_t N>
Tensor<T, int(N), D> Tensor<T, Rank, D>::expand(const std::array<std::int64_t, N>& shape) const {
  require_defined("expand()");
  return share_storage(detail::expand_layout(detail::layout_of(*this), shape), "expand()",
                       [from = shape_](const auto& g) { return detail::sum_to(g, from); });
}

template <Element T, int Rank, Device D>
Tensor<T, Rank, D> Tensor<T, Rank, D>::contiguous() const {
  require_defined("contiguous()");
  if (is_contiguous()) return *this;
  Tensor out = allocate(shape_);
  detail::assign(out, *this);
  return out;
}

template <Element T, int Rank, Device D>
template <std::size_t N, class Back>
Tensor<T, int(N), D> Tensor<T, Rank, D>::share_storage(const detail::StridedLayout<N>& layout, const char* name, const Back& back) const {
  Tensor<T, int(N), D> out(storage_, layout.offset, layout.shape, layout.strides);
  out.view_ = true;
#if !defined(ET_NO_AUTOGRAD)
  // In grad mode a view of a floating-point tensor is linked to it (autograd/views.hpp):
  // this tensor gets autograd state now if it has none, for a write into the view to reach.
  if constexpr (detail::is_floating_v<T>) {
    if (!autograd_ && grad_enabled()) autograd_ = std::make_shared<detail::AutogradMeta<T, Rank, D>>();
  }
#endif
  if (autograd_) detail::record_view(out, *this, back, name);
  return out;
}

template <Element T, int Rank, Device D>
Tensor<T, Rank, D> Tensor<T, Rank, D>::zeros_like_shape(const Shape<Rank>& shape) {
  Tensor out = allocate(shape);
  detail::evaluate(out, detail::ScalarExpr<T>(T(0)));  // recorded nowhere: backward code
  return out;
}

}  // namespace et
