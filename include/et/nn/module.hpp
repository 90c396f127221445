// Modules (namespace et::nn). A module is a class template on its device whose one
// function members() lists what it holds; the base et::nn::Module<Derived> derives the
// rest from that list:
//
//   template <class T, class D>
//   struct Mlp : et::nn::Module<Mlp<T, D>> {
//     et::nn::Linear<T, D> fc1, fc2;
//     Mlp() = default;                                     // to() builds the copy anew
//     Mlp(D dev, std::uint64_t seed) : fc1(dev, 64, 32, seed), fc2(dev, 32, 10, seed + 1) {}
//     auto members() { return et::nn::members("fc1", fc1, "fc2", fc2); }
//     et::Tensor<T, 2, D> forward(const et::Tensor<T, 2, D>& x) { return fc2(et::eval(et::relu(fc1(x)))); }
//   };
//
//   m(x)                  forward(x)
//   m.to(et::cuda<0>)     the same module on another device: Mlp<T, et::Cuda<0>>, parameters
//                         and buffers copied (the device is replaced in the type's arguments)
//   m.parameters()        std::vector<et::optim::Parameter<T, D>>: the tensors that require grad
//   m.train() m.eval()    the mode of the module and every submodule (Dropout, BatchNorm2d)
//   et::nn::save / load   every tensor by its dotted name (nn/safetensors.hpp)
//
// A member is a submodule (anything with members()), a tensor (a parameter when it requires
// grad, else a buffer, as BatchNorm2d's running statistics) or a setting (any other value:
// to() copies it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/autograd/graph.hpp"
#include "et/optim/parameter.hpp"
#include "et/tensor.hpp"

namespace et::nn {

/// One entry of members(): a name and a reference to the member.
template <class X>
struct Member {
  std::string name;
  X& value;
};

namespace detail {

template <class Tuple, std::size_t... I>
auto pair_up(const Tuple& args, std::index_sequence<I...>) {
  return std::tuple{Member<std::remove_reference_t<std::tuple_element_t<2 * I + 1, Tuple>>>{
      std::string(std::get<2 * I>(args)), std::get<2 * I + 1>(args)}...};
}

}  // namespace detail

/// What members() returns: members("fc1", fc1, "fc2", fc2, ...), names then members.
template <class... Args>
auto members(Args&... args) {
  static_assert(sizeof...(Args) % 2 == 0, "et: members() takes pairs: a name, then the member (\"fc1\", fc1, ...)");
  return detail::pair_up(std::forward_as_tuple(args...), std::make_index_sequence<sizeof...(Args) / 2>{});
}

template <class M>
concept HasMembers = requires(M& m) { m.members(); };

namespace detail {

/// A module's members, also for a const module (members() is written once, non-const).
template <class M>
auto members_of(const M& m) {
  return const_cast<M&>(m).members();
}

/// members() as a std::vector of one member type: a list whose length the program decides
/// (ModuleList); any other members() is a tuple, fixed by the type.
template <class X>
inline constexpr bool is_member_vector_v = false;
template <class X>
inline constexpr bool is_member_vector_v<std::vector<Member<X>>> = true;

/// f(name, member) for each member.
template <class M, class F>
void for_each_member(const M& m, F&& f) {
  auto list = members_of(m);
  if constexpr (is_member_vector_v<decltype(list)>) {
    for (auto& entry : list) f(entry.name, entry.value);
  } else {
    std::apply([&](auto&&... entry) { (f(entry.name, entry.value), ...); }, list);
  }
}

/// The type with every device among its template arguments replaced by To, recursively
/// (Mlp<float, Cpu> -> Mlp<float, Cuda<0>>; Sequential<Linear<float, Cpu>, ReLU> likewise).
template <class X, class To>
struct rebind {
  using type = X;
};
template <class X, class To>
  requires Device<X>
struct rebind<X, To> {
  using type = To;
};
template <template <class...> class M, class... A, class To>
struct rebind<M<A...>, To> {
  using type = M<typename rebind<A, To>::type...>;
};
template <class X, class To>
using rebind_t = typename rebind<X, To>::type;

/// The type of the first tensor a module holds (void when it holds none).
template <class... X>
struct first_non_void {
  using type = void;
};
template <class X, class... Rest>
struct first_non_void<X, Rest...> {
  using type = std::conditional_t<std::is_void_v<X>, typename first_non_void<Rest...>::type, X>;
};
template <class X>
struct first_tensor;
template <class Tuple>
struct first_tensor_in;
template <class... X>
struct first_tensor_in<std::tuple<Member<X>...>> {
  using type = typename first_non_void<typename first_tensor<X>::type...>::type;
};
template <class X>
struct first_tensor_in<std::vector<Member<X>>> {
  using type = typename first_tensor<X>::type;
};
template <class X>
struct first_tensor {
  using type = void;
};
template <class T, int R, class D>
struct first_tensor<Tensor<T, R, D>> {
  using type = Tensor<T, R, D>;
};
template <HasMembers X>
struct first_tensor<X> {
  using type = typename first_tensor_in<decltype(std::declval<X&>().members())>::type;
};

/// A module's element type and device: its first tensor's (float on the CPU when it has none).
template <class M, class First = typename first_tensor<M>::type>
struct module_types {
  using value_type = typename First::value_type;
  using device_type = typename First::device_type;
};
template <class M>
struct module_types<M, void> {
  using value_type = float;
  using device_type = Cpu;
};

struct ModuleAccess;

}  // namespace detail

/// f(name, tensor) for every tensor of m and its submodules, by dotted name ("fc1.weight",
/// "0.bias" in a Sequential): the names et::nn::save writes. A submodule listed under the
/// name "" adds no part to its tensors' names (the LSTM's layers: "weight_ih_l0").
template <class M, class F>
  requires HasMembers<std::remove_const_t<M>>
void for_each_tensor(M& m, F&& f, const std::string& prefix = "") {
  detail::for_each_member(m, [&](const std::string& name, auto& value) {
    using V = std::remove_cvref_t<decltype(value)>;
    if constexpr (is_tensor_v<V>) {
      if constexpr (std::is_const_v<M>) f(prefix + name, std::as_const(value));
      else f(prefix + name, value);
    } else if constexpr (HasMembers<V>) {
      const std::string inner = name.empty() ? prefix : prefix + name + ".";  // "": its tensors keep their own names
      if constexpr (std::is_const_v<M>) for_each_tensor(std::as_const(value), f, inner);
      else for_each_tensor(value, f, inner);
    }
  });
}

/// The base of every module (CRTP): forward through operator(), to, parameters, train/eval.
template <class Derived>
class Module {
 public:
  /// forward(args...).
  template <class... X>
  decltype(auto) operator()(const X&... x) {
    return self().forward(x...);
  }

  /// The same module on `dev`: a module of the type with the device replaced, its tensors
  /// copied there (requires_grad kept; a copy even to the same device), its settings and
  /// mode copied. Needs a default constructor (the copy is built anew, then filled).
  template <Device To>
  auto to(To dev) const {
    using Out = detail::rebind_t<Derived, To>;
    static_assert(std::is_default_constructible_v<Out>,
                  "et: Module::to(dev) builds the module anew on dev, then copies into it: give it a default constructor (Model() = default;)");
    Out out;
    copy_module(self(), out, dev);
    return out;
  }

  /// The tensors that require grad, this module's and its submodules', in members() order:
  /// what an optimizer takes. They share storage with the module.
  auto parameters() const {
    using Types = detail::module_types<Derived>;
    using T = typename Types::value_type;
    using D = typename Types::device_type;
    std::vector<optim::Parameter<T, D>> out;
    for_each_tensor(self(), [&](const std::string&, const auto& t) {
      using V = std::remove_cvref_t<decltype(t)>;
      if constexpr (et::detail::is_floating_v<typename V::value_type>) {  // not counters such as num_batches_tracked
        static_assert(std::is_same_v<typename V::value_type, T> && std::is_same_v<typename V::device_type, D>,
                      "et: parameters() lists tensors of one element type and one device, but this module mixes them");
        if (t.defined() && t.requires_grad()) out.emplace_back(t);
      }
    });
    return out;
  }

  /// Training mode (the default) for this module and every submodule; train(false) is eval().
  Derived& train(bool on = true) {
    training_ = on;
    detail::for_each_member(self(), [on](const std::string&, auto& member) {
      if constexpr (requires { member.train(on); }) member.train(on);
    });
    return self();
  }
  Derived& eval() { return train(false); }
  bool is_training() const noexcept { return training_; }

 private:
  friend struct detail::ModuleAccess;
  template <class>
  friend class Module;

  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }

  template <class Src, class Dst, class To>
  static void copy_module(const Src& src, Dst& dst, To dev);
  template <class Src, class Dst, class To>
  static void copy_members(const Src& src, Dst& dst, To dev);

  bool training_ = true;
};

namespace detail {

struct ModuleAccess {
  template <class M>
  static void set_training(M& m, bool on) {
    if constexpr (requires { m.training_; }) m.training_ = on;
  }
};

/// A tensor's copy on `dev`, detached, then requiring grad again if it did.
template <class T, int R, class D, class To>
Tensor<T, R, To> copy_tensor_to(const Tensor<T, R, D>& t, To dev) {
  if (!t.defined()) return {};
  Tensor<T, R, To> out;
  {
    NoGradGuard no_grad;
    if constexpr (std::is_same_v<D, To>) out = t.detach().clone();
    else out = t.detach().to(dev);
  }
  if (t.requires_grad()) out.requires_grad_(true);
  return out;
}

}  // namespace detail

template <class Derived>
template <class Src, class Dst, class To>
void Module<Derived>::copy_module(const Src& src, Dst& dst, To dev) {
  if constexpr (detail::is_member_vector_v<decltype(detail::members_of(src))>) {
    dst.resize(src.size());  // a ModuleList: as many modules as the source has
    for (std::size_t k = 0; k != src.size(); ++k) copy_module(src[k], dst[k], dev);
    detail::ModuleAccess::set_training(dst, src.is_training());
    return;
  } else {
    copy_members(src, dst, dev);
  }
}

template <class Derived>
template <class Src, class Dst, class To>
void Module<Derived>::copy_members(const Src& src, Dst& dst, To dev) {
  auto from = detail::members_of(src);
  auto into = dst.members();
  static_assert(std::tuple_size_v<decltype(from)> == std::tuple_size_v<decltype(into)>,
                "et: Module::to(dev): the module on the other device lists other members");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&](const auto& source, auto& target) {
          using S = std::remove_cvref_t<decltype(source)>;
          if constexpr (is_tensor_v<S>) target = detail::copy_tensor_to(source, dev);
          else if constexpr (HasMembers<S>) copy_module(source, target, dev);
          else target = source;
        }(std::get<I>(from).value, std::get<I>(into).value),
        ...);
  }(std::make_index_sequence<std::tuple_size_v<decltype(from)>>{});
  if constexpr (requires { src.is_training(); }) detail::ModuleAccess::set_training(dst, src.is_training());
}

/// Modules of one type, as many as the program decides (PyTorch's nn.ModuleList): its
/// members are named "0", "1", ..., so that saved weights line up with PyTorch's.
///
///   et::nn::ModuleList<Block<float, D>> blocks;
///   for (int k = 0; k < 9; ++k) blocks.push_back(Block<float, D>(dev, 16, seed + k));
///   for (auto& block : blocks) x = block(x);
template <class M>
class ModuleList : public Module<ModuleList<M>> {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<M> modules) : modules_(std::move(modules)) {}

  void push_back(M module) { modules_.push_back(std::move(module)); }
  void resize(std::size_t n) { modules_.resize(n); }
  std::size_t size() const noexcept { return modules_.size(); }
  M& operator[](std::size_t k) { return modules_[k]; }
  const M& operator[](std::size_t k) const { return modules_[k]; }
  auto begin() { return modules_.begin(); }
  auto end() { return modules_.end(); }

  std::vector<Member<M>> members() {
    std::vector<Member<M>> list;
    list.reserve(modules_.size());
    for (std::size_t k = 0; k != modules_.size(); ++k) list.push_back({std::to_string(k), modules_[k]});
    return list;
  }

 private:
  std::vector<M> modules_;
};

}  // namespace et::nn
