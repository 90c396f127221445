// Part of et/tensor.hpp, which includes it after the class (include et/tensor.hpp, not
// this): the bodies of Tensor's copies (clone, to, to_vector, item; their documentation is
// at the declarations). Each copies the storage span a layout covers, with the runtime's
// copy between the two devices (runtime/memory.hpp); none runs a kernel.
#pragma once

namespace et {

template <Element T, int Rank, Device D>
Tensor<T, Rank, D> Tensor<T, Rank, D>::clone() const {
  require_defined("clone()");
  Tensor out = copy_span_to<D>();
  if (autograd_) detail::record_view(out, *this, [](const Tensor& g) { return g; }, "clone()");
  return out;
}

template <Element T, int Rank, Device D>
template <Device To>
Tensor<T, Rank, To> Tensor<T, Rank, D>::to(To) const {
  if constexpr (std::is_same_v<To, D>) {
    return *this;
  } else {
    require_defined("to()");
    auto out = copy_span_to<To>(true);
    if (autograd_) detail::record_view(out, *this, [](const auto& g) { return g.to(D{}); }, "to()");
    return out;
  }
}

template <Element T, int Rank, Device D>
std::vector<T> Tensor<T, Rank, D>::to_vector() const {
  require_defined("to_vector()");
  const Tensor<T, Rank, Cpu> host = to(cpu).contiguous();
  std::vector<T> out(static_cast<std::size_t>(numel()));
  const T* base = host.data();
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data()
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = base[i];
  } else if (!out.empty()) {
    std::memcpy(out.data(), base, out.size() * sizeof(T));
  }
  return out;
}

template <Element T, int Rank, Device D>
T Tensor<T, Rank, D>::item() const {
  require_defined("item()");
  if (numel() != 1)
    throw ShapeError("et: item() needs exactly one element, but the tensor has shape " + format_shape(shape_) +
                     " (" + std::to_string(numel()) + " elements)");
  T value{};
  detail::copy_bytes(-1, &value, D::index, data(), sizeof(T));
  return value;
}

template <Element T, int Rank, Device D>
template <Device To>
Tensor<T, Rank, To> Tensor<T, Rank, D>::copy_span_to(bool blocking) const {
  const auto bytes = static_cast<std::size_t>(detail::storage_bytes(shape_, strides_, sizeof(T)));
  if constexpr (To::is_cuda) detail::check_device_index(To::index);
#if defined(ET_HAS_CUDA_RUNTIME)
  detail::note_stream_uses(*this);  // read on this device's current stream
#endif
  auto storage = detail::allocate_on<To>(bytes);
  detail::copy_between<To, D>(storage, storage.get(), storage_, data(), bytes, blocking);
  return Tensor<T, Rank, To>(std::move(storage), 0, shape_, strides_);
}

}  // namespace et
