// Internal (included by eval/evaluator.hpp): the per-element readers and the writer that
// the CUDA kernels and the CPU loops call. A reader is a flat, trivially copyable struct
// (pointers, strides, scalars) with three access modes:
//   linear(i, ctx)       every operand is laid out like the contiguous output;
//   strided(i, c, ctx)   any layout: c is the output coordinate, each leaf dots it with its
//                        (broadcast, possibly zero) strides;
//   vector<V>(i, ctx)    V consecutive elements at once (16-byte loads on the GPU), in two
//                        steps: load<V>(i) issues every memory access of the subtree, then
//                        compute<V>(loaded, i, ctx) does the arithmetic. A tree's loads thus
//                        all precede its arithmetic: evaluated node by node, later operands'
//                        loads came after earlier ones' arithmetic and branches (the wrap
//                        checks, division's slow path), which the compiler does not hoist
//                        loads across, and a thread waited for memory once per operand.
// `ctx` holds the values of the shared subexpressions computed earlier for the same
// element (eval/program.hpp); a SlotReader hands one of them on instead of recomputing it.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "et/config.hpp"
#include "et/types.hpp"

namespace et::detail {

/// V elements, aligned for one (or, past 16 bytes, several) wide load.
template <class T, int V>
struct alignas(sizeof(T) * V <= 16 ? sizeof(T) * V : 16) Vec {
  T v[V];
};

/// An output coordinate (rank 0 keeps one unused slot).
template <int R, class Index>
struct Coord {
  Index c[R > 0 ? R : 1];
};

template <int R, class Index>
ET_HD Index dot(const Coord<R, Index>& coord, const Index (&strides)[R > 0 ? R : 1]) {
  Index offset = 0;
  for (int d = 0; d < R; ++d) offset += coord.c[d] * strides[d];
  return offset;
}

// A minimal tuple for device code (std::tuple is not usable in kernels).
template <std::size_t I, class T>
struct PackSlot {
  T value;
};
template <class Seq, class... Ts>
struct PackBase;
template <std::size_t... Is, class... Ts>
struct PackBase<std::index_sequence<Is...>, Ts...> : PackSlot<Is, Ts>... {
  PackBase() = default;
  ET_HD explicit PackBase(const Ts&... values)
    requires(sizeof...(Ts) > 0)
      : PackSlot<Is, Ts>{values}... {}
};
template <class... Ts>
struct Pack : PackBase<std::index_sequence_for<Ts...>, Ts...> {
  using PackBase<std::index_sequence_for<Ts...>, Ts...>::PackBase;
  Pack() = default;
};
template <std::size_t I, class T>
ET_HD const T& pack_get(const PackSlot<I, T>& slot) {
  return slot.value;
}
template <std::size_t I, class T>
ET_HD T& pack_get(PackSlot<I, T>& slot) {
  return slot.value;
}

/// True when two values have the same bytes (scalars: NaN equals NaN; generators: the
/// same parameters; padding that differs only makes equal values look different, which
/// costs speed, never correctness).
template <class T>
bool same_bytes(const T& a, const T& b) {
  static_assert(std::is_trivially_copyable_v<T>);
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// How the linear kernel reads a broadcast operand (layout.hpp's linear_wrap): element
/// (i / wrap_div) % wrap_mod of the output's index i, in 32 bits (the launcher takes this
/// path for fewer than 2^32 elements); wrap_mod 0: element i. Only 64-bit programs, the
/// linear kernel's, of rank 2 and up carry it (an empty base elsewhere): the 32-bit ones
/// stay as small as before, and a rank-1 output's only broadcast operand is one element
/// repeated, which the strided kernel reads at stride 0 (plan_reads). Every leaf load of a
/// program that carries it tests wrap_mod: the depth-6 shared form (bench/depth.cu, rank 1,
/// 19 leaf loads a thread, issue-bound) went from 1.23 to 1.44 ms at 2^28 on an H200 when
/// the tests came in, and takes 1.420 ms on an H100 without them against 1.467 with.
template <int R, class Index>
inline constexpr bool carries_wrap = sizeof(Index) == 8 && R >= 2;
template <bool Wide>
struct ReaderWrap {
  std::uint32_t wrap_div = 1, wrap_mod = 0;
};
template <>
struct ReaderWrap<false> {};

/// V elements converted to their compute type.
template <class To, class T, int V>
ET_HD Vec<To, V> convert_vec(const Vec<T, V>& loaded) {
  if constexpr (std::is_same_v<To, T>) {
    return loaded;
  } else {
    Vec<To, V> converted;
ET_UNROLL
    for (int k = 0; k < V; ++k) converted.v[k] = static_cast<To>(loaded.v[k]);
    return converted;
  }
}

/// Reads elements of type T and hands them on in T's compute type (half -> float). On the
/// GPU the linear modes of a 64-bit reader follow its wrap; the CPU loops never read a
/// wrapped operand linearly (plan.linear excludes it).
template <class T, int R, class Index>
struct TensorReader : ReaderWrap<carries_wrap<R, Index>> {
  static constexpr bool wraps = carries_wrap<R, Index>;
  using value_type = compute_t<T>;
  const T* data;
  Index strides[R > 0 ? R : 1];
  template <class Ctx>
  ET_HD value_type linear(Index i, const Ctx&) const {
#if defined(__CUDA_ARCH__)
    if constexpr (wraps)
      if (this->wrap_mod) return static_cast<value_type>(data[static_cast<std::uint32_t>(i) / this->wrap_div % this->wrap_mod]);
#endif
    return static_cast<value_type>(data[i]);
  }
  template <class Ctx>
  ET_HD value_type strided(Index, const Coord<R, Index>& c, const Ctx&) const {
    return static_cast<value_type>(data[dot<R, Index>(c, strides)]);
  }
  /// V elements from i (a multiple of V): one wide load. An operand that is not broadcast
  /// costs one test of wrap_mod; the wrapped reads are apart (below). With both of their
  /// tests and the index select inline in every leaf's load, the depth-6 shared form
  /// (bench/depth.cu: 19 leaf loads a thread, issue-bound) took 1.64 ms at 2^28 instead
  /// of 1.43 (H200).
  template <int V>
  ET_HD Vec<T, V> load(Index i) const {
#if defined(__CUDA_ARCH__)
    if constexpr (wraps)
      if (this->wrap_mod) return load_wrapped<V>(i);
#endif
    return *reinterpret_cast<const Vec<T, V>*>(data + i);
  }
  /// Wrapped: a row of a repeated block (wrap_mod a multiple of V) or V copies of one
  /// element (wrap_div a multiple of V).
  template <int V>
  ET_HD Vec<T, V> load_wrapped(Index i) const {
    const auto at = static_cast<std::uint32_t>(i);
    if (this->wrap_div == 1) return *reinterpret_cast<const Vec<T, V>*>(data + at % this->wrap_mod);
    const T value = data[at / this->wrap_div % this->wrap_mod];
    Vec<T, V> copies;
ET_UNROLL
    for (int k = 0; k < V; ++k) copies.v[k] = value;
    return copies;
  }
  template <int V, class Ctx>
  ET_HD Vec<value_type, V> compute(const Vec<T, V>& loaded, Index, const Ctx&) const {
    return convert_vec<value_type>(loaded);
  }
  template <int V, class Ctx>
  ET_HD Vec<value_type, V> vector(Index i, const Ctx& ctx) const {
    return compute<V>(load<V>(i), i, ctx);
  }
  friend bool same_reader(const TensorReader& a, const TensorReader& b) {
    return a.data == b.data && same_bytes(a.strides, b.strides);
  }
};

/// What load<V>() gives for a reader that reads no memory (its values are computed).
struct NothingLoaded {};

template <class T>
struct ScalarReader {
  using value_type = T;
  T value;
  template <class Index, class Ctx>
  ET_HD T linear(Index, const Ctx&) const {
    return value;
  }
  template <class Index, class C, class Ctx>
  ET_HD T strided(Index, const C&, const Ctx&) const {
    return value;
  }
  template <int V, class Index>
  ET_HD NothingLoaded load(Index) const {
    return {};
  }
  template <int V, class Index, class Ctx>
  ET_HD Vec<T, V> compute(NothingLoaded, Index, const Ctx&) const {
    Vec<T, V> out;
    for (int k = 0; k < V; ++k) out.v[k] = value;
    return out;
  }
  template <int V, class Index, class Ctx>
  ET_HD Vec<T, V> vector(Index i, const Ctx& ctx) const {
    return compute<V>(NothingLoaded{}, i, ctx);
  }
  friend bool same_reader(const ScalarReader& a, const ScalarReader& b) { return same_bytes(a.value, b.value); }
};

template <class Gen, int R, class Index>
struct GeneratorReader {
  using value_type = compute_t<typename Gen::value_type>;
  Gen gen;
  std::int64_t base;             // the generator's index at the first element read (a box's origin)
  Index strides[R > 0 ? R : 1];  // the generator's own row-major strides, broadcast
  template <class Ctx>
  ET_HD value_type linear(Index i, const Ctx&) const {
    return static_cast<value_type>(gen(base + static_cast<std::int64_t>(i)));
  }
  template <class Ctx>
  ET_HD value_type strided(Index, const Coord<R, Index>& c, const Ctx&) const {
    return static_cast<value_type>(gen(base + static_cast<std::int64_t>(dot<R, Index>(c, strides))));
  }
  template <int V>
  ET_HD NothingLoaded load(Index) const {
    return {};
  }
  template <int V, class Ctx>
  ET_HD Vec<value_type, V> compute(NothingLoaded, Index i, const Ctx&) const {
    Vec<value_type, V> out;
    for (int k = 0; k < V; ++k) out.v[k] = static_cast<value_type>(gen(base + static_cast<std::int64_t>(i) + k));
    return out;
  }
  template <int V, class Ctx>
  ET_HD Vec<value_type, V> vector(Index i, const Ctx& ctx) const {
    return compute<V>(NothingLoaded{}, i, ctx);
  }
  friend bool same_reader(const GeneratorReader& a, const GeneratorReader& b) {
    return same_bytes(a.gen, b.gen) && a.base == b.base && same_bytes(a.strides, b.strides);
  }
};

template <class Op, class... Readers>
struct MapReader {
  using value_type = decltype(Op{}(std::declval<typename Readers::value_type>()...));
  Pack<Readers...> children;

  template <class Index, class Ctx>
  ET_HD value_type linear(Index i, const Ctx& ctx) const {
    return linear_impl(i, ctx, std::index_sequence_for<Readers...>{});
  }
  template <class Index, class C, class Ctx>
  ET_HD value_type strided(Index i, const C& c, const Ctx& ctx) const {
    return strided_impl(i, c, ctx, std::index_sequence_for<Readers...>{});
  }
  /// Every child's loads, nested as the tree is.
  template <int V, class Index>
  ET_HD auto load(Index i) const {
    return load_impl<V>(i, std::index_sequence_for<Readers...>{});
  }
  template <int V, class Index, class Loaded, class Ctx>
  ET_HD Vec<value_type, V> compute(const Loaded& loaded, Index i, const Ctx& ctx) const {
    return compute_impl<V>(loaded, i, ctx, std::index_sequence_for<Readers...>{});
  }
  template <int V, class Index, class Ctx>
  ET_HD Vec<value_type, V> vector(Index i, const Ctx& ctx) const {
    return compute<V>(load<V>(i), i, ctx);
  }
  friend bool same_reader(const MapReader& a, const MapReader& b) {
    return same_children(a, b, std::index_sequence_for<Readers...>{});
  }

 private:
  template <class Index, class Ctx, std::size_t... Is>
  ET_HD value_type linear_impl(Index i, const Ctx& ctx, std::index_sequence<Is...>) const {
    return Op{}(pack_get<Is>(children).linear(i, ctx)...);
  }
  template <class Index, class C, class Ctx, std::size_t... Is>
  ET_HD value_type strided_impl(Index i, const C& c, const Ctx& ctx, std::index_sequence<Is...>) const {
    return Op{}(pack_get<Is>(children).strided(i, c, ctx)...);
  }
  template <int V, class Index, std::size_t... Is>
  ET_HD auto load_impl(Index i, std::index_sequence<Is...>) const {
    using Loaded = Pack<decltype(pack_get<Is>(children).template load<V>(i))...>;
    return Loaded(pack_get<Is>(children).template load<V>(i)...);
  }
  template <int V, class Index, class Loaded, class Ctx, std::size_t... Is>
  ET_HD Vec<value_type, V> compute_impl(const Loaded& loaded, Index i, const Ctx& ctx,
                                        std::index_sequence<Is...>) const {
    const Pack<Vec<typename Readers::value_type, V>...> values(
        pack_get<Is>(children).template compute<V>(pack_get<Is>(loaded), i, ctx)...);
    Vec<value_type, V> out;
ET_UNROLL
    for (int k = 0; k < V; ++k) out.v[k] = Op{}(pack_get<Is>(values).v[k]...);
    return out;
  }
  template <std::size_t... Is>
  static bool same_children(const MapReader& a, const MapReader& b, std::index_sequence<Is...>) {
    return (same_reader(pack_get<Is>(a.children), pack_get<Is>(b.children)) && ...);
  }
};

/// A shared subexpression: the value binding K of the program computed for this element
/// (ctx), or, where this occurrence holds other operands than the binding's first one,
/// its values materialized beforehand into a contiguous buffer of the output's shape.
template <std::size_t K, class T>
struct SlotReader {
  using value_type = T;
  const T* materialized;
  template <class Index, class Ctx>
  ET_HD T linear(Index i, const Ctx& ctx) const {
    return materialized ? materialized[i] : pack_get<K>(ctx);
  }
  template <class Index, class C, class Ctx>
  ET_HD T strided(Index i, const C&, const Ctx& ctx) const {
    return materialized ? materialized[i] : pack_get<K>(ctx);
  }
  template <int V, class Index>
  ET_HD Vec<T, V> load(Index i) const {
    return materialized ? *reinterpret_cast<const Vec<T, V>*>(materialized + i) : Vec<T, V>{};
  }
  template <int V, class Index, class Ctx>
  ET_HD Vec<T, V> compute(const Vec<T, V>& loaded, Index, const Ctx& ctx) const {
    return materialized ? loaded : pack_get<K>(ctx);
  }
  template <int V, class Index, class Ctx>
  ET_HD Vec<T, V> vector(Index i, const Ctx& ctx) const {
    return compute<V>(load<V>(i), i, ctx);
  }
  friend bool same_reader(const SlotReader& a, const SlotReader& b) { return a.materialized == b.materialized; }
};

/// Calls f(slot) on every SlotReader inside a reader (eval/program.hpp patches them).
template <class Reader, class F>
void for_each_slot(Reader&, F&) {}
template <std::size_t K, class T, class F>
void for_each_slot(SlotReader<K, T>& slot, F& f) {
  f(slot);
}
template <class Op, class... Readers, class F>
void for_each_slot(MapReader<Op, Readers...>& reader, F& f) {
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    (for_each_slot(pack_get<Is>(reader.children), f), ...);
  }(std::index_sequence_for<Readers...>{});
}

/// Calls f(leaf) on every leaf reader inside a reader (tensors, generators, slots,
/// scalars), in a fixed order, on the host or the device.
template <class Reader, class F>
ET_HD void for_each_leaf_reader(Reader& leaf, F& f) {
  f(leaf);
}
template <class Op, class... Readers, class F, std::size_t... Is>
ET_HD void for_each_child_leaf_reader(MapReader<Op, Readers...>& reader, F& f, std::index_sequence<Is...>) {
  (for_each_leaf_reader(pack_get<Is>(reader.children), f), ...);
}
template <class Op, class... Readers, class F>
ET_HD void for_each_leaf_reader(MapReader<Op, Readers...>& reader, F& f) {
  for_each_child_leaf_reader(reader, f, std::index_sequence_for<Readers...>{});
}

/// The tensor leaves only: f(reader) on every TensorReader (the strided kernel stages
/// transposed operands through shared memory).
template <class F>
struct TensorLeaves {
  F& f;
  template <class T, int R, class Index>
  ET_HD void operator()(TensorReader<T, R, Index>& reader) const {
    f(reader);
  }
  template <class Leaf>
  ET_HD void operator()(Leaf&) const {}
};
template <class Reader, class F>
ET_HD void for_each_tensor_reader(Reader& reader, F& f) {
  TensorLeaves<F> tensors{f};
  for_each_leaf_reader(reader, tensors);
}

/// Moves every leaf of a reader to the element at index i (coordinate c) of its index
/// space, so that it then reads the elements along the last axis from there: element j of
/// the row at row_coordinate(j) (the strided kernel's rows and the CPU's row loop, which
/// take a program only when every leaf reads that axis at stride 1 or 0: RowsReadable).
template <int R, class Index>
struct RebaseTo {
  Index i;
  Coord<R, Index> c;
  template <class T>
  ET_HD void operator()(TensorReader<T, R, Index>& reader) const {
    reader.data += dot<R, Index>(c, reader.strides);
  }
  template <class Gen>
  ET_HD void operator()(GeneratorReader<Gen, R, Index>& reader) const {
    reader.base += static_cast<std::int64_t>(dot<R, Index>(c, reader.strides));
  }
  template <std::size_t K, class T>
  ET_HD void operator()(SlotReader<K, T>& reader) const {
    if (reader.materialized) reader.materialized += i;  // contiguous over the index space
  }
  template <class T>
  ET_HD void operator()(ScalarReader<T>&) const {}
};

/// Element j of a row, relative to a rebased reader: read through strided(j, ...) (a slot
/// at j, a tensor at j times its last stride: 1, or 0 for one broadcast along the row).
template <int R, class Index>
ET_HD Coord<R, Index> row_coordinate(Index j) {
  Coord<R, Index> c{};
  if constexpr (R >= 1) c.c[R - 1] = j;
  return c;
}

/// Whether every leaf reads the last axis at stride 1 or 0 (broadcast along it): a row read
/// from its first element is coalesced; `unit`: all at 1, a rebased row reads as linear(j).
template <int R, class Index>
struct RowsReadable {
  bool ok = true, unit = true;
  template <class T>
  ET_HD void operator()(TensorReader<T, R, Index>& reader) {
    ok = ok && (reader.strides[R - 1] == 1 || reader.strides[R - 1] == 0);
    unit = unit && reader.strides[R - 1] == 1;
  }
  template <class Gen>
  ET_HD void operator()(GeneratorReader<Gen, R, Index>& reader) {
    ok = ok && (reader.strides[R - 1] == 1 || reader.strides[R - 1] == 0);
    unit = unit && reader.strides[R - 1] == 1;
  }
  template <class Leaf>
  ET_HD void operator()(Leaf&) {}  // slots are contiguous over the index space; scalars read nothing
};

/// Where results go: the destination tensor's pointer and strides. The value computed
/// (in a compute type) is converted to T here, so a fused half expression rounds once.
template <class T, int R, class Index>
struct Writer {
  T* data;
  Index strides[R > 0 ? R : 1];
  template <class U>
  ET_HD void linear(Index i, U value) const {
    data[i] = static_cast<T>(value);
  }
  template <class U>
  ET_HD void strided(const Coord<R, Index>& c, U value) const {
    data[dot<R, Index>(c, strides)] = static_cast<T>(value);
  }
  template <int V, class U>
  ET_HD void vector(Index i, const Vec<U, V>& values) const {
    Vec<T, V> out;
    for (int k = 0; k < V; ++k) out.v[k] = static_cast<T>(values.v[k]);
    *reinterpret_cast<Vec<T, V>*>(data + i) = out;
  }
};

}  // namespace et::detail
