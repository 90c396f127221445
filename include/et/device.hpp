// Device tags (Cpu, Cuda<I>), the Device concept, device names, and the
// compile-time check that two operands live on the same device.
#pragma once

#include <cstddef>
#include <string_view>
#include <type_traits>

#include "et/device_mismatch.hpp"

namespace et {

/// The host: tensors in ordinary (pageable) host memory, evaluated by OpenMP loops.
struct Cpu {
  static constexpr int index = -1;
  static constexpr bool is_cuda = false;
};

/// CUDA device number I as the process sees it (after CUDA_VISIBLE_DEVICES).
/// Using I >= device_count() at run time throws et::Error.
template <int I>
struct Cuda {
  static_assert(I >= 0, "et: Cuda<I> needs a non-negative device index I");
  static constexpr int index = I;
  static constexpr bool is_cuda = true;
};

inline constexpr Cpu cpu{};
template <int I>
inline constexpr Cuda<I> cuda{};

namespace detail {
template <class D>
struct is_device : std::false_type {};
template <>
struct is_device<Cpu> : std::true_type {};
template <int I>
struct is_device<Cuda<I>> : std::true_type {};

/// The "device" of a plain C++ scalar: it combines with every device.
struct AnyDevice {
  static constexpr int index = -2;
  static constexpr bool is_cuda = false;
};
}  // namespace detail

template <class D>
concept Device = detail::is_device<D>::value;

template <class D>
concept CudaDevice = Device<D> && D::is_cuda;

/// A device's name as a constexpr string: "cpu", "cuda:0", "cuda:12".
struct DeviceName {
  char text[16]{};
  std::size_t length = 0;
  constexpr operator std::string_view() const { return {text, length}; }
  constexpr std::string_view view() const { return {text, length}; }
  constexpr const char* c_str() const { return text; }
};

namespace detail {
constexpr DeviceName make_device_name(int index) {
  DeviceName name;
  if (index < 0) {
    for (char c : std::string_view("cpu")) name.text[name.length++] = c;
    return name;
  }
  for (char c : std::string_view("cuda:")) name.text[name.length++] = c;
  char digits[11]{};
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + index % 10);
    index /= 10;
  } while (index > 0);
  while (count > 0) name.text[name.length++] = digits[--count];
  return name;
}
}  // namespace detail

template <Device D>
inline constexpr DeviceName device_name = detail::make_device_name(D::index);

/// Run-time name of a device index (-1 is the CPU).
inline DeviceName device_name_of(int index) { return detail::make_device_name(index); }

namespace detail {


/// The device two operands share. A mismatch stops compilation with a message that
/// names both devices; the result then falls back to A so that no further errors follow.
template <class A, class B>
constexpr auto common_device_of() {
  if constexpr (std::is_same_v<A, AnyDevice>) {
    return B{};
  } else if constexpr (std::is_same_v<B, AnyDevice> || std::is_same_v<A, B>) {
    return A{};
  } else {
    constexpr int low = A::index < B::index ? A::index : B::index;
    constexpr int high = A::index < B::index ? B::index : A::index;
    [[maybe_unused]] devices_meet<low, high> report;
    return A{};
  }
}

template <class... Ds>
struct common_device;
template <class D>
struct common_device<D> {
  using type = D;
};
template <class A, class B, class... Rest>
struct common_device<A, B, Rest...> {
  using type = typename common_device<decltype(common_device_of<A, B>()), Rest...>::type;
};
template <class... Ds>
using common_device_t = typename common_device<Ds...>::type;

}  // namespace detail
}  // namespace et
