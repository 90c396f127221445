// Adopting memory that other code owns: et::from_blob(dev, ptr, shape[, strides][, deleter])
// makes a tensor over it without copying, typed like any other (the device in the type).
//
//   float* p = ...;                                    // cudaMalloc'd on GPU 0 by other code
//   auto t = et::from_blob(et::cuda<0>, p, {rows, cols});                 // borrows p
//   auto u = et::from_blob(et::cuda<0>, p, {rows, cols}, [](float* q) { cudaFree(q); });  // owns p
//
// Without a deleter the memory must outlive every tensor (and view) made from it; with one,
// deleter(ptr) runs on the host once the last of them is gone, which may be before work
// queued on the GPU has finished with it (cudaFree waits for the device; a stream-ordered
// free belongs on the stream that used it). Strides count elements, as t.strides()
// does; they must not be negative, and the bytes the layout reaches must fit in int64
// (et::ShapeError otherwise, as PyTorch's storage-size check). Where the CUDA runtime is
// present, the pointer is checked against the device: device memory of another GPU, or
// host memory given as a Cuda<I> tensor (or device memory as a host tensor), is an
// et::Error rather than a crash in the first kernel. Pinned tensors need page-locked
// memory (cudaHostAlloc / cudaHostRegister). Work by etensor on a borrowed pointer is
// queued on the device's current stream (et::current_stream); order it against the
// owner's own work with events.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "et/config.hpp"
#include "et/device.hpp"
#include "et/layout.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"

namespace et {
namespace detail {

/// Throws et::Error unless `data` can back a tensor of `count` elements on D (see above).
template <class T, class D>
void check_foreign_pointer(const T* data, std::int64_t count, const char* what) {
  const std::string where = std::string("et: ") + what + "(" + std::string(device_name<D>.view()) + ", ...)";
  if (count == 0) return;
  if (data == nullptr) throw Error(where + ": a null pointer for " + std::to_string(count) + " elements");
  if (reinterpret_cast<std::uintptr_t>(data) % alignof(T) != 0)
    throw Error(where + ": the pointer is not aligned to its element type (" + std::to_string(alignof(T)) +
                " bytes)");
#if defined(ET_HAS_CUDA_RUNTIME)
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    (void)cudaGetLastError();  // no CUDA device or driver: only host memory can be meant
    if constexpr (D::is_cuda) throw Error(where + ": the CUDA runtime cannot tell where the pointer points");
    return;
  }
  const bool device_memory = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if constexpr (D::is_cuda) {
    if (!device_memory)
      throw Error(where + ": the pointer is host memory; a Cuda tensor needs memory of that GPU");
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != D::index)
      throw Error(where + ": the pointer is memory of cuda:" + std::to_string(attributes.device));
  } else if constexpr (std::is_same_v<D, Pinned>) {
    if (attributes.type != cudaMemoryTypeHost)
      throw Error(where + ": the pointer is not page-locked host memory (cudaHostAlloc or cudaHostRegister)");
  } else {
    if (attributes.type == cudaMemoryTypeDevice)
      throw Error(where + ": the pointer is memory of cuda:" + std::to_string(attributes.device) +
                  "; a Cpu tensor needs host memory");
  }
#endif
}

/// The tensor over `data` that from_blob and from_dlpack (`operation`, in messages) return,
/// once shape, strides (their reach in bytes within int64) and pointer are checked.
template <class T, std::size_t N, class D, class Deleter>
Tensor<T, int(N), D> adopt(const char* operation, D, T* data, const std::array<std::int64_t, N>& shape,
                           const std::array<std::int64_t, N>& strides, Deleter&& deleter) {
  const std::int64_t count = checked_numel(shape);
  for (std::size_t d = 0; d < N; ++d)
    if (strides[d] < 0)
      throw ShapeError("et: " + std::string(operation) + ": negative stride " + std::to_string(strides[d]) +
                       " at axis " + std::to_string(d) + " (strides " + format_shape(strides) + ")");
  const std::int64_t bytes = storage_bytes(shape, strides, sizeof(T), operation);
  check_foreign_pointer<T, D>(data, count, operation);
  if (count > 0 && reinterpret_cast<std::uintptr_t>(data) > UINTPTR_MAX - static_cast<std::uintptr_t>(bytes))
    throw Error("et: " + std::string(operation) + ": the layout's " + std::to_string(bytes) +
                " bytes from the pointer pass the end of the address space");
  using Release = std::decay_t<Deleter>;
  std::function<void(void*)> release;
  if constexpr (std::is_copy_constructible_v<Release>) {
    release = [deleter = std::forward<Deleter>(deleter)](void* p) { deleter(static_cast<T*>(p)); };
  } else {  // std::function copies what it holds: a move-only deleter is held through a pointer
    release = [held = std::make_shared<Release>(std::forward<Deleter>(deleter))](void* p) { (*held)(static_cast<T*>(p)); };
  }
  std::shared_ptr<void> storage(static_cast<void*>(data), ForeignBlock{std::move(release), {}});
  return Tensor<T, int(N), D>(std::move(storage), 0, shape, strides);
}

struct Borrowed {
  template <class P>
  void operator()(P*) const noexcept {}
};

}  // namespace detail

template <Element T, Device D, std::size_t N>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::int64_t (&shape)[N]) {
  const auto s = std::to_array(shape);
  return detail::adopt("from_blob", dev, data, s, detail::contiguous_strides(s), detail::Borrowed{});
}
template <Element T, Device D, std::size_t N>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::int64_t (&shape)[N], const std::int64_t (&strides)[N]) {
  return detail::adopt("from_blob", dev, data, std::to_array(shape), std::to_array(strides), detail::Borrowed{});
}
template <Element T, Device D, std::size_t N, std::invocable<T*> Deleter>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::int64_t (&shape)[N], Deleter deleter) {
  const auto s = std::to_array(shape);
  return detail::adopt("from_blob", dev, data, s, detail::contiguous_strides(s), std::move(deleter));
}
template <Element T, Device D, std::size_t N, std::invocable<T*> Deleter>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::int64_t (&shape)[N], const std::int64_t (&strides)[N],
                               Deleter deleter) {
  return detail::adopt("from_blob", dev, data, std::to_array(shape), std::to_array(strides), std::move(deleter));
}
/// The same with std::array shapes (a rank known at compile time, extents at run time).
template <Element T, Device D, std::size_t N>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::array<std::int64_t, N>& shape) {
  return detail::adopt("from_blob", dev, data, shape, detail::contiguous_strides(shape), detail::Borrowed{});
}
template <Element T, Device D, std::size_t N>
Tensor<T, int(N), D> from_blob(D dev, T* data, const std::array<std::int64_t, N>& shape,
                               const std::array<std::int64_t, N>& strides) {
  return detail::adopt("from_blob", dev, data, shape, strides, detail::Borrowed{});
}

}  // namespace et
