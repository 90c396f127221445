// Tensor<T, Rank, D>: a handle to shared, reference-counted storage on device D plus
// a layout (shape, strides in elements, offset). Copying a handle aliases the storage
// (as in PyTorch); clone() copies the data.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/device.hpp"
#include "et/expr/functors.hpp"
#include "et/expr/node.hpp"
#include "et/layout.hpp"
#include "et/runtime/memory.hpp"
#include "et/tensor/forward.hpp"
#include "et/tensor/meta.hpp"
#include "et/tensor/untracked.hpp"
#include "et/types.hpp"
#include "et/views.hpp"

namespace et {

/// A tensor of element type T (float, double, int32, int64, bool, half, bfloat16) and rank
/// Rank on device D.
///
/// Assignment has two meanings, as names and slices have in PyTorch:
///  - `a = b;` with b a Tensor of the same type rebinds the handle a (no data moves);
///  - `a = expr;` (any other expression or scalar) evaluates into a's existing storage,
///    as does assigning to a temporary view (`x.slice(...) = y`) and `a.copy_(b)`.
/// A window (the view t(...) gives, and every copy of its handle) is always written, as
/// Eigen's blocks and Kokkos's subviews are (docs/guide.md, "HPC codes"); et::noalias(a) = e
/// skips the aliasing check. A default-constructed tensor is undefined: assigning allocates.
template <Element T, int Rank, Device D = Cpu>
class Tensor : public detail::ExprTag {
  static_assert(Rank >= 0, "et: a tensor's rank cannot be negative");

 public:
  using value_type = T;
  using device_type = D;
  static constexpr int rank = Rank;

  Tensor() = default;
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  /// Rebinds this handle to b's storage and layout, or, when this is a window, writes b's
  /// values into its elements (b broadcasts to its shape; one kernel).
  Tensor& operator=(const Tensor& b) & { return window_ ? write(b) : rebind(b); }
  Tensor& operator=(Tensor&& b) & { return window_ ? write(b) : rebind(std::move(b)); }
  ~Tensor() = default;

  /// Allocates a contiguous tensor of the expression's shape and evaluates it (one kernel).
  template <Expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor>)
  Tensor(const E& expr) {  // NOLINT(google-explicit-constructor): `Tensor z = a + b;` is the point
    // The device check first, in the function the user called: the shortest report (device.hpp).
    [[maybe_unused]] detail::same_devices<D, typename E::device_type> check;
    static_assert(E::rank == Rank,
                  "et: a tensor constructed from an expression must have the expression's rank; "
                  "assign to an existing tensor to broadcast a lower-rank expression");
    detail::assign(*this, expr);
  }

  /// Evaluates an expression into this tensor's storage (shapes must agree or broadcast).
  template <Expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor>)
  Tensor& operator=(const E& expr) & {
    [[maybe_unused]] detail::same_devices<D, typename E::device_type> check;
    detail::assign(*this, expr);
    return *this;
  }
  template <Expression E>
  Tensor& operator=(const E& expr) && {  // a temporary view: write through, also from a Tensor
    [[maybe_unused]] detail::same_devices<D, typename E::device_type> check;
    detail::assign(*this, expr);
    return *this;
  }
  /// Fills every element with a scalar. Throws et::Error for an undefined tensor (it has
  /// no shape to fill) and for a value an integer tensor cannot hold.
  template <Scalar S>
  Tensor& operator=(S value) & {
    require_defined("assigning a scalar");
    detail::assign(*this, detail::ScalarExpr<T>(detail::scalar_as<T>(value, "assigning a scalar")));
    return *this;
  }
  template <Scalar S>
  Tensor& operator=(S value) && {
    require_defined("assigning a scalar");
    detail::assign(*this, detail::ScalarExpr<T>(detail::scalar_as<T>(value, "assigning a scalar")));
    return *this;
  }

  /// Copies src's elements into this tensor's storage (src broadcasts to this shape).
  template <Expression E>
  Tensor& copy_(const E& src) {
    [[maybe_unused]] detail::same_devices<D, typename E::device_type> check;
    require_defined("copy_()");
    detail::assign(*this, src);
    return *this;
  }

  /// `z += x` evaluates z + x into z (one kernel); likewise -=, *=, /=.
  template <Operand X>
  Tensor& operator+=(const X& x) {
    [[maybe_unused]] detail::same_device_operands<Tensor, X> check;
    return compound<detail::Add>(x);
  }
  template <Operand X>
  Tensor& operator-=(const X& x) {
    [[maybe_unused]] detail::same_device_operands<Tensor, X> check;
    return compound<detail::Sub>(x);
  }
  template <Operand X>
  Tensor& operator*=(const X& x) {
    [[maybe_unused]] detail::same_device_operands<Tensor, X> check;
    return compound<detail::Mul>(x);
  }
  template <Operand X>
  Tensor& operator/=(const X& x) {
    [[maybe_unused]] detail::same_device_operands<Tensor, X> check;
    return compound<detail::Div>(x);
  }

  /// This tensor as a DLPack DLManagedTensor, sharing its storage: et::dlpack_export
  /// (et/interop/dlpack.hpp, which et/et.hpp includes where <dlpack/dlpack.h> is found).
  auto to_dlpack() const { return dlpack_export(*this); }

  /// False for a default-constructed handle.
  bool defined() const noexcept { return defined_; }
  /// True for the result of a view operation (view, reshape without a copy, transpose,
  /// permute, slice, select, squeeze, unsqueeze, expand): it shares another tensor's storage.
  bool is_view() const noexcept { return view_; }
  const Shape<Rank>& shape() const noexcept { return shape_; }
  const Shape<Rank>& strides() const noexcept { return strides_; }
  /// Extent of one axis; negative axes count from the end. Throws ShapeError if out of range.
  std::int64_t size(int axis) const { return shape_[static_cast<std::size_t>(detail::normalize_axis(axis, Rank))]; }
  std::int64_t numel() const noexcept {
    for (auto extent : shape_)
      if (extent == 0) return 0;  // the other extents' product may pass int64: {INT64_MAX, 2, 0}
    std::int64_t count = 1;
    for (auto extent : shape_) count *= extent;
    return count;
  }
  bool is_contiguous() const noexcept { return detail::is_contiguous_layout(shape_, strides_); }
  /// First element; a device pointer for CUDA tensors.
  /// For Pinned tensors it first waits for any copy started without blocking that still
  /// uses the storage (runtime/pinned.hpp), so that host code never sees a copy in flight.
  T* data() const noexcept {
    if constexpr (std::is_same_v<D, Pinned>) detail::wait_host_access(storage_);
    return storage_ ? static_cast<T*>(storage_.get()) + offset_ : nullptr;
  }
  /// Offset of the first element in the storage, in elements.
  std::int64_t offset() const noexcept { return offset_; }
  /// The shared allocation this tensor views (shared by handles, views and clones' sources).
  const std::shared_ptr<void>& storage() const noexcept { return storage_; }
  D device() const noexcept { return D{}; }

  /// A deep copy with the same shape. Contiguous tensors copy their bytes; other layouts
  /// copy the storage span they cover and keep their strides (no kernel either way, so this
  /// works in plain C++ files for CUDA tensors too). Hence the clone of a stepped slice also
  /// copies the elements it skips, and the clone of an expand()ed tensor keeps its stride-0
  /// axes (readable, not writable); contiguous() gives a compact, writable copy instead.
  Tensor clone() const;

  /// The same tensor on another device. To the same device it returns *this (shared
  /// storage, no copy). `Cpu <-> Cuda<I>` goes through cudaMemcpy; `Cuda<I> -> Cuda<J>`
  /// through a peer copy (staged by the driver where peer access is impossible).
  template <Device To>
  Tensor<T, Rank, To> to(To) const;

  /// The same, returning before the copy is done. Only Pinned memory copies to or from a
  /// GPU this way; the first host access to the pinned side waits for the copy by itself.
  template <Device To>
  Tensor<T, Rank, To> to(To, NonBlocking) const {
    constexpr bool pageable_to_gpu = std::is_same_v<D, Cpu> && To::is_cuda;
    constexpr bool gpu_to_pageable = D::is_cuda && std::is_same_v<To, Cpu>;
    [[maybe_unused]] detail::non_blocking_copy<pageable_to_gpu, gpu_to_pageable> check;  // device_mismatch.hpp
    if constexpr (pageable_to_gpu || gpu_to_pageable || std::is_same_v<To, D>) {
      return to(To{});
    } else {
      require_defined("to()");
      return copy_span_to<To>(false);
    }
  }

  /// A page-locked copy of a Cpu tensor (Tensor<T, Rank, Pinned>).
  Tensor<T, Rank, Pinned> pin() const
    requires std::is_same_v<D, Cpu>
  {
    return to(pinned);
  }

  /// All elements in row-major order, copied to the host (waits for the device).
  std::vector<T> to_vector() const;

  /// The single element (numel() == 1), copied to the host.
  T item() const;

  // --- Autograd (autograd/graph.hpp) ------------------------------------------------
  // A tensor that requires grad records the operations computed from it; a fused
  // expression is ONE recorded operation whose backward is one fused kernel.

  /// Marks this tensor (a leaf) as needing a gradient. Only floating-point tensors can.
  /// The mark is shared by copies of this handle made afterwards.
  Tensor& requires_grad_(bool needed = true) {
    static_assert(detail::is_floating_v<T>, "et: only floating-point tensors can require grad");
    require_defined("requires_grad_()");
    if (autograd_ && autograd_->grad_fn)
      throw Error("et: requires_grad_() on a tensor computed by a recorded operation; detach() it first");
    meta().requires_grad = needed;
    return *this;
  }
  /// True for a leaf that requires grad and for every result of a recorded operation.
  bool requires_grad() const noexcept { return detail::meta_needs_grad(autograd_); }
  /// True unless a recorded operation computed this tensor.
  bool is_leaf() const noexcept { return !autograd_ || !autograd_->grad_fn; }
  /// The accumulated gradient: undefined until a backward reached this (leaf) tensor.
  Tensor grad() const { return autograd_ ? autograd_->grad : Tensor{}; }
  /// Sets the accumulated gradient to zeros (in place, so handles to it see the zeros).
  void zero_grad() {
    if (autograd_ && autograd_->grad.defined()) {
      NoGradGuard no_grad;
      autograd_->grad = T(0);
    }
  }
  /// The same storage and layout without autograd history: needs no gradient.
  Tensor detach() const {
    Tensor out = *this;
    out.autograd_.reset();
    if (autograd_) out.meta().version = autograd_->version;  // in-place writes stay visible
    return out;
  }
  /// Computes the gradients of this 0-d (or one-element) tensor with respect to every leaf
  /// that requires grad and that it was computed from, adding them to their grad().
  /// Frees the graph's saved tensors unless `et::retain_graph` is passed.
  void backward() const { detail::run_backward<T, Rank, D>(*this, nullptr, false); }
  void backward(RetainGraph) const { detail::run_backward<T, Rank, D>(*this, nullptr, true); }
  /// The same for a tensor of any shape, given the gradient of some scalar w.r.t. it.
  void backward(const Tensor& gradient) const { detail::run_backward<T, Rank, D>(*this, &gradient, false); }
  void backward(const Tensor& gradient, RetainGraph) const { detail::run_backward<T, Rank, D>(*this, &gradient, true); }

  /// Internal: the autograd state (null for a handle that never took part in autograd).
  const detail::MetaPtr<T, Rank, D>& autograd_meta() const noexcept { return autograd_; }
  /// Internal: this handle's autograd state, created on first use.
  detail::AutogradMeta<T, Rank, D>& meta() {
    if (!autograd_) autograd_ = std::make_shared<detail::AutogradMeta<T, Rank, D>>();
    return *autograd_;
  }
  /// Internal: counts an in-place write, in this handle's autograd state (shared with its
  /// views, tensor/meta.hpp) and in the storage (shared with every handle over it,
  /// runtime/version.hpp).
  void note_write() const noexcept {
    if (autograd_) autograd_->version->value.fetch_add(1, std::memory_order_relaxed);
    if (detail::VersionCounter* data = detail::storage_version(storage_))
      data->value.fetch_add(1, std::memory_order_relaxed);
  }

  // --- Views -------------------------------------------------------------------------
  // A view is a new handle on the same storage with another layout: no element copied,
  // O(Rank) host work, on every device. Writing into a view writes into the tensor it
  // views: `x.slice(0, 0, 4) = 0.0f;`, `x.select(1, 2) = y;`, `x.transpose(0, 1) += 1;`.
  // A named view is a handle like any other (`v = w` rebinds it; v.copy_(w) writes),
  // except a window (operator() below), which `v = w` writes. Axes may be negative,
  // counted from the end; bad axes, bounds or extents throw ShapeError.

  /// The same elements in the same (row-major) order, read as `shape`; its length is the
  /// result's rank (for rank 0 pass et::Shape<0>{}). One extent may be -1: it is inferred
  /// from the element count. Copies nothing. Precondition: the element counts agree, and
  /// strides exist that read this layout in that order (PyTorch's rule: always for a
  /// contiguous tensor; for other layouts, only axes that are laid out contiguously
  /// among themselves can be merged). Otherwise throws ShapeError; reshape() copies then.
  template <std::size_t N>
  Tensor<T, int(N), D> view(const std::array<std::int64_t, N>& shape) const;
  template <std::size_t N>
  Tensor<T, int(N), D> view(const std::int64_t (&shape)[N]) const {
    return view(detail::as_array(shape));
  }

  /// view(shape) when this layout allows it (no copy; the result shares the storage);
  /// otherwise a contiguous copy (one elementwise evaluation, O(numel)) read as `shape`,
  /// which shares nothing with this tensor. As in PyTorch, whether the result aliases this
  /// tensor thus depends on the layout; use view() where writes must reach this tensor.
  /// The copy of a CUDA tensor runs a kernel, so reshape() of a CUDA tensor needs a file
  /// compiled by nvcc. One extent may be -1; throws ShapeError when the counts differ.
  template <std::size_t N>
  Tensor<T, int(N), D> reshape(const std::array<std::int64_t, N>& shape) const;
  template <std::size_t N>
  Tensor<T, int(N), D> reshape(const std::int64_t (&shape)[N]) const {
    return reshape(detail::as_array(shape));
  }

  /// Axes a and b swapped (the matrix transpose for rank 2). Copies nothing.
  Tensor transpose(int a, int b) const {
    static_assert(Rank >= 1, "et: transpose() needs a tensor of rank 1 or more");
    require_defined("transpose()");
    return share_storage(detail::transpose_layout(detail::layout_of(*this), a, b), "transpose()",
                         [a, b](const auto& g) {
                           return detail::untracked_view(g, detail::transpose_layout(detail::layout_of(g), a, b));
                         });
  }

  /// The axes reordered: axis k of the result is axis axes[k] of this tensor. `axes` must
  /// name every axis exactly once (negative axes allowed), else ShapeError. Copies nothing.
  Tensor permute(const std::array<int, Rank>& axes) const;
  template <std::size_t N>
  Tensor permute(const int (&axes)[N]) const {
    static_assert(N == std::size_t(Rank), "et: permute() takes exactly one axis per dimension of the tensor");
    if constexpr (N == std::size_t(Rank)) return permute(detail::as_array(axes));
    else return *this;  // unreachable: the static_assert has failed
  }

  /// Several axes at once, xtensor's and Kokkos's way: one argument per leading axis, an
  /// et::range (keeps the axis: range(b, e[, step]), range(b), range()) or an integer
  /// (selects one element and drops the axis); negative bounds count from the end; axes
  /// past the arguments are kept whole. The rank is known at compile time. A view (no copy)
  /// that is a window: assigning a tensor to it writes (see the class comment). Bounds out
  /// of range throw ShapeError, as slice() does.
  ///   auto interior = u(et::range(1, -1), et::range(1, -1));   // u[1:-1, 1:-1]
  ///   auto plane = v(2, et::range(), et::range(0, -2));         // v[2, :, :-2], rank 2
  template <IndexArgument... Args>
  auto operator()(const Args&... args) const;
  /// True for a window (t(...)'s views and copies of their handles).
  bool is_window() const noexcept { return window_; }

  /// Elements begin, begin + step, ... before end along `axis` (ceil((end - begin) / step)
  /// of them), as Python's x[begin:end:step]. Negative begin and end count from the end;
  /// after that 0 <= begin <= end <= size(axis) and step >= 1 must hold, else ShapeError
  /// (bounds are never clamped). Copies nothing.
  Tensor slice(int axis, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;

  /// The sub-tensor at `index` along `axis`, with that axis removed: a
  /// Tensor<T, Rank - 1, D>, as PyTorch's x.select(axis, index). A negative index counts
  /// from the end; out of range throws ShapeError. Copies nothing.
  auto select(int axis, std::int64_t index) const;

  /// A new axis of extent 1 at position `axis` of the result, in [-(Rank + 1), Rank]
  /// (-1 appends it): a Tensor<T, Rank + 1, D>. Copies nothing.
  Tensor<T, Rank + 1, D> unsqueeze(int axis) const;

  /// `axis` removed: a Tensor<T, Rank - 1, D>. The axis must have extent 1, else
  /// ShapeError (the rank is part of the type, so unlike PyTorch this never does nothing).
  /// Copies nothing.
  auto squeeze(int axis) const;

  /// Broadcasts to `shape` (rank N >= Rank, trailing axes aligned, as NumPy): new leading
  /// axes and axes of extent 1 stretch with stride 0, so every element along them is the
  /// same element; -1 keeps an existing extent. Expanding an axis whose extent is not 1
  /// throws ShapeError. Copies nothing; the result can be read but not written (its
  /// elements overlap in memory): write into expand(...).contiguous() instead.
  template <std::size_t N>
  Tensor<T, int(N), D> expand(const std::array<std::int64_t, N>& shape) const;
  template <std::size_t N>
  Tensor<T, int(N), D> expand(const std::int64_t (&shape)[N]) const {
    return expand(detail::as_array(shape));
  }

  /// *this when already contiguous (row-major; no copy, shared storage); otherwise a
  /// contiguous copy of the elements (one elementwise evaluation, O(numel)) sharing
  /// nothing. The copy of a CUDA tensor runs a kernel, so contiguous() of a CUDA tensor
  /// needs a file compiled by nvcc.
  Tensor contiguous() const;

  /// Wraps existing storage (used by creation functions and views). `storage` must
  /// hold every element the layout reaches.
  Tensor(std::shared_ptr<void> storage, std::int64_t offset, const Shape<Rank>& shape, const Shape<Rank>& strides)
      : storage_(std::move(storage)), offset_(offset), shape_(shape), strides_(strides), defined_(true) {}

  /// Allocates an uninitialized contiguous tensor. Throws ShapeError for a negative
  /// extent or an element count past int64, et::Error for a missing device, and
  /// et::OutOfMemory when the allocation fails.
  static Tensor allocate(const Shape<Rank>& shape) {
    const std::int64_t count = detail::checked_numel(shape);
    if (static_cast<std::uint64_t>(count) > SIZE_MAX / sizeof(T))
      throw ShapeError("et: shape " + format_shape(shape) + " needs more bytes than fit in size_t");
    if constexpr (D::is_cuda) detail::check_device_index(D::index);
    return Tensor(detail::allocate_on<D>(static_cast<std::size_t>(count) * sizeof(T)), 0, shape,
                  detail::contiguous_strides(shape));
  }

 private:
  template <class Op, class X>
  Tensor& compound(const X& x) {
    require_defined("a compound assignment");
    detail::assign(*this, detail::make_map<Op>(*this, x));
    return *this;
  }

  Tensor& write(const Tensor& b) {  // a plain C++ file moves CUDA handles: a window's write is refused at run time
    if constexpr (D::is_cuda && !detail::device_compiler)
      throw Error("et: writing into a window of a CUDA tensor runs a kernel: compile this file with nvcc");
    else detail::assign(*this, b);
    return *this;
  }
  template <class B>
  Tensor& rebind(B&& b) {
    storage_ = std::forward<B>(b).storage_;
    autograd_ = std::forward<B>(b).autograd_;
    offset_ = b.offset_, shape_ = b.shape_, strides_ = b.strides_;
    defined_ = b.defined_, view_ = b.view_, window_ = b.window_;
    return *this;
  }
  void require_defined(const char* what) const {
    if (!defined_) throw Error(std::string("et: ") + what + " on an undefined (default-constructed) tensor");
  }

  /// A view: another layout over this tensor's storage. `back(gradient of the view)` gives
  /// this tensor's gradient, recorded when this tensor needs one (autograd/views.hpp).
  template <std::size_t N, class Back>
  Tensor<T, int(N), D> share_storage(const detail::StridedLayout<N>& layout, const char* name, const Back& back) const;

  /// Zeros of `shape` (a view's backward scatters its gradient into them).
  static Tensor zeros_like_shape(const Shape<Rank>& shape);

  template <Device To>
  Tensor<T, Rank, To> copy_span_to(bool blocking = true) const;

  std::shared_ptr<void> storage_;
  mutable detail::MetaPtr<T, Rank, D> autograd_;  // made by a const view() in grad mode (share_storage)
  std::int64_t offset_ = 0;
  Shape<Rank> shape_{};
  Shape<Rank> strides_{};
  bool defined_ = false;
  bool view_ = false;
  bool window_ = false;  // made by operator(): assignment writes

  template <Element, int, Device>
  friend class Tensor;  // share_storage marks the views it makes, of any rank
};

template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, int R, class D>
inline constexpr bool is_tensor_v<Tensor<T, R, D>> = true;

/// Same as t.to(To{}).
template <Device To, class T, int R, class D>
Tensor<T, R, To> to(const Tensor<T, R, D>& t) {
  return t.to(To{});
}

}  // namespace et

// The bodies of the methods declared above, out of the class to keep it readable.
#include "et/tensor/copies.hpp"  // IWYU pragma: export
#include "et/tensor/views.hpp"   // IWYU pragma: export
