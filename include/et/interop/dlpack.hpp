// DLPack, the tensor exchange format of PyTorch, CuPy, JAX, NumPy and others (the header
// <dlpack/dlpack.h>: Debian's libdlpack-dev, which scripts/install-deps installs).
//
//   DLManagedTensor* out = t.to_dlpack();      // shares t's storage; the consumer calls
//                                              // out->deleter(out) when it is done
//   auto u = et::from_dlpack<float, 2>(et::cuda<0>, in);   // takes ownership of `in`
//
// Export: data points at the first element (byte_offset 0), shape and strides in elements
// (strides always given), the device kDLCPU, kDLCUDAHost (Pinned) or kDLCUDA with its
// index; dtypes float32/64, float16, bfloat16, int32/64, uint8, bool (code 6, kDLBool in DLPack
// 0.8 and later). The tensor's storage lives until the deleter is called.
// Import: the element type, rank and device are part of etensor's type, so the caller names
// them; a DLPack tensor of another dtype, rank, device or with lanes != 1 is an et::Error,
// and then `in` stays the caller's. Otherwise the returned tensor owns `in` and calls its
// deleter when its last view is gone. A null strides field means contiguous; strides must
// not be negative, and the layout must reach no more bytes than int64 counts (et::ShapeError,
// as PyTorch's storage-size check). A device type this header's enum lacks reads as its number.
// Work on imported memory runs on etensor's current stream (et::current_stream): the
// producer's pending work on it must be ordered before (DLPack's __dlpack__(stream=...)
// protocol is the Python side's business).
#pragma once

#include <dlpack/dlpack.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "et/device.hpp"
#include "et/interop/from_blob.hpp"
#include "et/layout.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"

namespace et {
namespace detail::dlpack {

/// kDLBool, which DLPack's header defines from version 0.8 on.
inline constexpr std::uint8_t bool_code = 6;

template <class T>
constexpr DLDataType data_type() {
  if constexpr (std::is_same_v<T, bool>) return {bool_code, 8, 1};
  else if constexpr (std::is_same_v<T, bfloat16>) return {kDLBfloat, 16, 1};
  else if constexpr (std::is_same_v<T, half>) return {kDLFloat, 16, 1};
  else if constexpr (std::is_floating_point_v<T>) return {kDLFloat, static_cast<std::uint8_t>(8 * sizeof(T)), 1};
  else if constexpr (std::is_unsigned_v<T>) return {kDLUInt, static_cast<std::uint8_t>(8 * sizeof(T)), 1};
  else return {kDLInt, static_cast<std::uint8_t>(8 * sizeof(T)), 1};
}

template <class D>
DLDevice device_of() {
  if constexpr (D::is_cuda) return {kDLCUDA, D::index};
  else if constexpr (std::is_same_v<D, Pinned>) return {kDLCUDAHost, 0};
  else return {kDLCPU, 0};
}

inline std::string describe(DLDataType t) {
  const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  return (t.code < std::size(codes) ? std::string(codes[t.code]) : "code " + std::to_string(t.code)) +
         std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

/// The device type as the integer it is: a producer may send one this header's enum lacks,
/// and loading such a value as DLDeviceType is undefined behaviour.
inline std::int64_t device_type_of(const DLDevice& d) {
  std::underlying_type_t<DLDeviceType> raw;
  std::memcpy(&raw, &d.device_type, sizeof raw);
  return static_cast<std::int64_t>(raw);
}

inline std::string describe(const DLDevice& d) {
  switch (device_type_of(d)) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda:" + std::to_string(d.device_id);
    case kDLCUDAHost: return "cuda host (pinned)";
    case kDLCUDAManaged: return "cuda managed";
    default: return "device type " + std::to_string(device_type_of(d));
  }
}

/// What an exported DLManagedTensor owns: the tensor (its storage) and the arrays DLTensor
/// points into.
template <class T, int R, class D>
struct Exported {
  Tensor<T, R, D> tensor;
  std::array<std::int64_t, R> shape{}, strides{};
  DLManagedTensor managed{};
};

}  // namespace detail::dlpack

/// t as a DLPack tensor (see the top of this file). t.to_dlpack() calls this.
template <class T, int R, class D>
DLManagedTensor* dlpack_export(const Tensor<T, R, D>& t) {
  if (!t.defined()) throw Error("et: to_dlpack() of an undefined tensor");
  using Owner = detail::dlpack::Exported<T, R, D>;
  auto owner = std::make_unique<Owner>();
  owner->tensor = t.detach();
  owner->shape = t.shape();
  owner->strides = t.strides();
  DLTensor& dl = owner->managed.dl_tensor;
  dl.data = static_cast<void*>(t.data());
  dl.device = detail::dlpack::device_of<D>();
  dl.ndim = R;
  dl.dtype = detail::dlpack::data_type<T>();
  dl.shape = R > 0 ? owner->shape.data() : nullptr;
  dl.strides = R > 0 ? owner->strides.data() : nullptr;
  dl.byte_offset = 0;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Owner*>(self->manager_ctx); };
  return &owner.release()->managed;
}

/// The DLPack tensor `managed` as an etensor tensor of element type T and rank R on `dev`
/// (see the top of this file): no copy; owns `managed` once it returns.
template <Element T, int R, Device D>
Tensor<T, R, D> from_dlpack(D dev, DLManagedTensor* managed) {
  if (managed == nullptr) throw Error("et: from_dlpack of a null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  const std::string want = std::string(dtype_name<T>) + ", rank " + std::to_string(R) + ", " +
                           detail::dlpack::describe(detail::dlpack::device_of<D>());
  const std::string got = detail::dlpack::describe(dl.dtype) + ", rank " + std::to_string(dl.ndim) + ", " +
                          detail::dlpack::describe(dl.device);
  const DLDataType type = detail::dlpack::data_type<T>();
  const DLDevice device = detail::dlpack::device_of<D>();
  const bool same_device = detail::dlpack::device_type_of(dl.device) == device.device_type &&
                           (device.device_type != kDLCUDA || dl.device.device_id == device.device_id);
  if (dl.dtype.code != type.code || dl.dtype.bits != type.bits || dl.dtype.lanes != 1 || dl.ndim != R ||
      !same_device)
    throw Error("et: from_dlpack<" + want + ">: the DLPack tensor is " + got);
  if (R > 0 && dl.shape == nullptr) throw Error("et: from_dlpack<" + want + ">: the DLPack tensor has no shape");
  std::array<std::int64_t, R> shape{}, strides{};
  for (int d = 0; d < R; ++d) shape[d] = dl.shape[d];
  if (dl.strides != nullptr) {
    for (int d = 0; d < R; ++d) strides[d] = dl.strides[d];
  } else {
    strides = detail::contiguous_strides(shape);
  }
  // As an integer: a producer's offset added to a pointer could leave it (undefined behaviour).
  // A null data pointer stays null whatever the offset (adopt refuses it where there are
  // elements); an offset past the end of the address space is refused here.
  const auto base = reinterpret_cast<std::uintptr_t>(dl.data);
  if (base != 0 && dl.byte_offset > UINTPTR_MAX - base)
    throw Error("et: from_dlpack<" + want + ">: byte_offset " + std::to_string(dl.byte_offset) +
                " passes the end of the address space");
  T* data = base == 0 ? nullptr : reinterpret_cast<T*>(base + dl.byte_offset);
  // adopt checks shape, strides and pointer before it attaches the deleter: a DLPack
  // tensor it refuses stays the caller's.
  return detail::adopt("from_dlpack", dev, data, shape, strides, [managed](T*) {
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
}

}  // namespace et
