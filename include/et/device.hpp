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

/// Page-locked (pinned) host memory: host memory that computes like Cpu and mixes with it
/// (an expression over Pinned and Cpu tensors is a Cpu expression, its result lives on
/// Cpu), and the only host memory that copies to and from a GPU without blocking
/// (.to(dev, et::non_blocking)). Its index is the CPU's: to device-mixing rules it is the host.
struct Pinned {
  static constexpr int index = -1;
  static constexpr bool is_cuda = false;
};

inline constexpr Cpu cpu{};
inline constexpr Pinned pinned{};

/// Asks .to() for a copy that returns before it is done (only between Pinned memory and a
/// GPU; see Tensor::to).
struct NonBlocking {};
inline constexpr NonBlocking non_blocking{};
template <int I>
inline constexpr Cuda<I> cuda{};

namespace detail {
template <class D>
struct is_device : std::false_type {};
template <>
struct is_device<Cpu> : std::true_type {};
template <>
struct is_device<Pinned> : std::true_type {};
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
template <>
inline constexpr DeviceName device_name<Pinned> = [] {
  DeviceName name;
  for (char c : std::string_view("cpu:pinned")) name.text[name.length++] = c;
  return name;
}();

/// Run-time name of a device index (-1 is the CPU).
inline DeviceName device_name_of(int index) { return detail::make_device_name(index); }

namespace detail {

/// Where the devices Ds first disagree: the lower and the higher index of the first
/// device and the first one that differs from it (AnyDevice, a scalar's, meets every
/// device), or {AnyDevice::index, AnyDevice::index} when they all agree.
struct DevicePair {
  int low;
  int high;
};
template <class... Ds>
constexpr DevicePair first_mismatch() {
  constexpr int any = AnyDevice::index;
  const int indices[] = {Ds::index..., any};
  int first = any;
  for (int index : indices) {
    if (index == any) continue;
    if (first == any) first = index;
    else if (index != first) return {first < index ? first : index, first < index ? index : first};
  }
  return {any, any};
}

/// The same-device check, for use where the operands arrive: declaring a variable of this
/// type stops compilation when Ds disagree, with a message that names the first two
/// devices that differ (device_mismatch.hpp). Declare it in the body of the function the
/// user called, not in a helper: every level between the user's call and this type is
/// one more line of "required from" in the compiler's report. A mismatch is reported once
/// per pair of devices, so the checks further down (common_device_t) add nothing.
template <class... Ds>
using same_devices = devices_meet<first_mismatch<Ds...>().low, first_mismatch<Ds...>().high>;

/// True when the devices Ds agree (the condition same_devices checks): code after a
/// failed check uses it to stop, so that no further errors follow.
template <class... Ds>
inline constexpr bool devices_agree_v = first_mismatch<Ds...>().low == first_mismatch<Ds...>().high;

/// The device of an elementwise operand: an expression's device_type, or AnyDevice for a
/// plain C++ scalar.
template <class X>
struct operand_device {
  using type = AnyDevice;
};
template <class X>
  requires requires { typename X::device_type; }
struct operand_device<X> {
  using type = typename X::device_type;
};

/// same_devices over the devices of elementwise operands (tensors, expressions, scalars),
/// as the operators receive them (forwarded: references, maybe const).
template <class... Xs>
using same_device_operands = same_devices<typename operand_device<std::remove_cvref_t<Xs>>::type...>;

/// The first device in Ds that is not AnyDevice (AnyDevice if there is none); Pinned
/// counts as Cpu, where expressions over it evaluate and put their results.
template <class... Ds>
struct first_device {
  using type = AnyDevice;
};
template <class D, class... Rest>
struct first_device<D, Rest...> {
  using type = std::conditional_t<std::is_same_v<D, AnyDevice>, typename first_device<Rest...>::type,
                                  std::conditional_t<std::is_same_v<D, Pinned>, Cpu, D>>;  // Pinned computes as Cpu
};

/// The device operands on Ds share. A mismatch stops compilation (same_devices), once;
/// the result then falls back to the first device, and the devices after the first
/// mismatch go unchecked, so that no further errors follow.
template <class... Ds>
struct common_device : same_devices<Ds...> {
  using type = typename first_device<Ds...>::type;
};
template <class... Ds>
using common_device_t = typename common_device<Ds...>::type;

/// common_device_t as a value, `common_device_of<A, B>()`; it checks in its own body, one
/// level nearer the caller than common_device_t.
template <class... Ds>
constexpr auto common_device_of() {
  [[maybe_unused]] same_devices<Ds...> check;
  return typename first_device<Ds...>::type{};
}

}  // namespace detail
}  // namespace et
