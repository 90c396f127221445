// A typed set of devices, and a batch split among them and put back together:
//
//   et::DeviceSet<et::Cuda<0>, et::Cuda<1>> gpus;
//   auto [x0, x1] = gpus.scatter(x);      // x's rows along axis 0, balanced: Tensor<T, R, Cuda<0>>, <.., Cuda<1>>
//   auto y = gpus.gather(std::tuple{f(x0), f(x1)});   // the pieces' rows, in order, on Cuda<0>
//   et::with_visible_devices<8>([&](auto gpus) { ... });  // DeviceSet of the first N GPUs (N <= 8) seen
//
// Every piece is typed by its device, so code written for one of them that mixes devices
// does not compile. Scatter and gather copy between the devices on their current streams,
// ordered as .to() orders them (a peer copy waits for the source's pending work), and both
// are recorded by autograd: the gradient of a piece of a scatter is its rows of the
// gradient of x, and the gradient of gather's result goes back to each piece's device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "et/autograd/graph.hpp"
#include "et/runtime/device_runtime.hpp"
#include "et/tensor.hpp"

namespace et {

namespace detail {
template <class D, class... Ds>
inline constexpr int count_of = ((std::is_same_v<D, Ds> ? 1 : 0) + ...);
template <class... Ds>
inline constexpr bool distinct_devices = ((count_of<Ds, Ds...> == 1) && ...);
}  // namespace detail

template <Device... Ds>
struct DeviceSet {
  static_assert(sizeof...(Ds) > 0, "et: a DeviceSet needs at least one device");
  static_assert(detail::distinct_devices<Ds...>, "et: a DeviceSet lists each device once");

  using devices = std::tuple<Ds...>;
  template <std::size_t I>
  using device = std::tuple_element_t<I, devices>;
  using first_device = device<0>;
  template <class T, int R>
  using pieces = std::tuple<Tensor<T, R, Ds>...>;

  static constexpr std::size_t size() noexcept { return sizeof...(Ds); }
  /// The devices' indices (Cuda<I>: I; the host: -1), in order.
  static constexpr std::array<int, sizeof...(Ds)> indices() noexcept { return {Ds::index...}; }
  template <Device D>
  static constexpr bool contains = (std::is_same_v<D, Ds> || ...);

  /// f(device, std::integral_constant<std::size_t, I>) for each device, in order.
  template <class F>
  static void for_each(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(device<I>{}, std::integral_constant<std::size_t, I>{}), ...);
    }(std::index_sequence_for<Ds...>{});
  }

  /// n rows split as evenly as they go: the first n % size() devices take one row more.
  static std::array<std::int64_t, sizeof...(Ds)> balanced(std::int64_t n) {
    if (n < 0) throw ShapeError("et: DeviceSet::balanced: a negative number of rows (" + std::to_string(n) + ")");
    std::array<std::int64_t, sizeof...(Ds)> rows{};
    const auto k = std::int64_t(size());
    for (std::int64_t i = 0; i < k; ++i) rows[std::size_t(i)] = n / k + (i < n % k ? 1 : 0);
    return rows;
  }

  /// x's rows (axis 0) split among the devices: balanced(x.size(0)), or `rows` (which
  /// must add up to x.size(0)). Piece I is a copy on device I (x itself where it already
  /// lives there, as .to() does).
  template <class T, int R, Device D>
  pieces<T, R> scatter(const Tensor<T, R, D>& x) const {
    static_assert(R >= 1, "et: DeviceSet::scatter splits axis 0, which a 0-d tensor does not have");
    return scatter(x, balanced(x.defined() ? x.size(0) : 0));  // the overload below rejects undefined x
  }
  template <class T, int R, Device D>
  pieces<T, R> scatter(const Tensor<T, R, D>& x, const std::array<std::int64_t, sizeof...(Ds)>& rows) const {
    static_assert(R >= 1, "et: DeviceSet::scatter splits axis 0, which a 0-d tensor does not have");
    if (!x.defined()) throw Error("et: DeviceSet::scatter of an undefined tensor");
    std::int64_t total = 0;
    std::string list;
    for (const std::int64_t r : rows) {
      if (r < 0) throw ShapeError("et: DeviceSet::scatter: a negative number of rows (" + std::to_string(r) + ")");
      total += r;
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    }
    if (total != x.size(0))
      throw ShapeError("et: DeviceSet::scatter: the rows given (" + list + ") add up to " + std::to_string(total) +
                       ", but the tensor has shape " + format_shape(x.shape()));
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      std::array<std::int64_t, sizeof...(Ds) + 1> begin{};
      for (std::size_t i = 0; i != size(); ++i) begin[i + 1] = begin[i] + rows[i];
      return pieces<T, R>{x.slice(0, begin[I], begin[I + 1]).to(device<I>{})...};
    }(std::index_sequence_for<Ds...>{});
  }

  /// The pieces' rows, in order, in one tensor on `to` (the first device by default). They
  /// must agree on every axis but the first.
  template <class T, int R, Device To = first_device>
  Tensor<T, R, To> gather(const pieces<T, R>& parts, To = {}) const {
    static_assert(R >= 1, "et: DeviceSet::gather joins along axis 0, which a 0-d tensor does not have");
    Shape<R> shape{};
    std::array<std::int64_t, sizeof...(Ds) + 1> begin{};
    for_each([&](auto, auto i) {
      const auto& part = std::get<decltype(i)::value>(parts);
      if (!part.defined())
        throw Error("et: DeviceSet::gather: piece " + std::to_string(i()) + " is an undefined tensor");
      Shape<R> trailing = part.shape();
      trailing[0] = shape[0];
      if (i() > 0 && trailing != shape)
        throw ShapeError("et: DeviceSet::gather: piece " + std::to_string(i()) + " has shape " +
                         format_shape(part.shape()) + ", but piece 0 has " + format_shape(std::get<0>(parts).shape()) +
                         " (only axis 0 may differ)");
      if (i() == 0) shape = part.shape();
      begin[i() + 1] = begin[i()] + part.size(0);
    });
    shape[0] = begin.back();
    auto out = Tensor<T, R, To>::allocate(shape);
    const std::int64_t row = shape[0] == 0 ? 0 : out.numel() / shape[0];
    for_each([&](auto, auto i) {
      using From = device<decltype(i)::value>;
      const auto part = std::get<decltype(i)::value>(parts).detach().contiguous();
      const auto bytes = std::size_t(part.numel()) * sizeof(T);
      if (bytes == 0) return;
      detail::note_stream_uses(part);
      detail::copy_between<To, From>(out.storage(), out.data() + begin[i()] * row, part.storage(), part.data(), bytes,
                                     true);
    });
#if !defined(ET_NO_AUTOGRAD)
    const bool record = std::apply([](const auto&... p) { return detail::records(p...); }, parts);
    if (record) {
      auto backward = [begin](const Tensor<T, R, To>& g, const auto& needs) {
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
          return pieces<T, R>{(needs[I] ? g.slice(0, begin[I], begin[I + 1]).to(device<I>{})
                                        : Tensor<T, R, device<I>>{})...};
        }(std::index_sequence_for<Ds...>{});
      };
      auto inputs = std::apply([](const auto&... p) { return std::tie(p...); }, parts);
      detail::attach(out, detail::make_op_node<Tensor<T, R, To>>("DeviceSet::gather", inputs, backward));
    }
#endif
    return out;
  }
};

/// The DeviceSet of CUDA devices 0 ... N-1.
namespace detail {
template <class Indices>
struct first_cuda_devices;
template <int... I>
struct first_cuda_devices<std::integer_sequence<int, I...>> {
  using type = DeviceSet<Cuda<I>...>;
};
}  // namespace detail
template <int N>
using FirstCudaDevices = typename detail::first_cuda_devices<std::make_integer_sequence<int, N>>::type;

namespace detail {
template <class R, int K, int Max, class F>
R call_with_first_devices(int n, F& f) {
  if constexpr (K == Max) {
    return f(FirstCudaDevices<Max>{});
  } else {
    if (n == K) return f(FirstCudaDevices<K>{});
    return call_with_first_devices<R, K + 1, Max>(n, f);
  }
}
}  // namespace detail

/// f(FirstCudaDevices<n>{}) for n = the number of GPUs this process sees (after
/// CUDA_VISIBLE_DEVICES), at most Max: one program for any count up to Max, each set typed.
/// et::Error when it sees none. f must return the same type for every n.
template <int Max, class F>
decltype(auto) with_visible_devices(F&& f) {
  static_assert(Max >= 1 && Max <= detail::max_cuda_devices, "et: with_visible_devices<Max>: Max must be in 1..64");
  const int seen = device_count();
  if (seen == 0) throw Error("et: with_visible_devices: this process sees no CUDA device");
  using R = decltype(f(FirstCudaDevices<1>{}));
  return detail::call_with_first_devices<R, 1, Max>(seen < Max ? seen : Max, f);
}

}  // namespace et
