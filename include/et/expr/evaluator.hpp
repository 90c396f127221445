// How a node is evaluated: make_reader turns an expression tree into one flat,
// trivially copyable struct of readers (pointers, strides, scalars) that both the CUDA
// kernel and the CPU loop call per element. Three access modes:
//   linear(i)       every operand is laid out like the contiguous output;
//   strided(i, c)   any layout: c is the output coordinate, each leaf dots it with its
//                   (broadcast, possibly zero) strides;
//   vector<V>(i)    V consecutive elements at once (16-byte loads on the GPU).
#pragma once

#include <cstdint>
#include <tuple>
#include <utility>

#include "et/config.hpp"
#include "et/expr/node.hpp"
#include "et/tensor.hpp"

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
  ET_HD explicit PackBase(const Ts&... values) : PackSlot<Is, Ts>{values}... {}
};
template <class... Ts>
struct Pack : PackBase<std::index_sequence_for<Ts...>, Ts...> {
  using PackBase<std::index_sequence_for<Ts...>, Ts...>::PackBase;
};
template <std::size_t I, class T>
ET_HD const T& pack_get(const PackSlot<I, T>& slot) {
  return slot.value;
}

/// Reads elements of type T and hands them on in T's compute type (half -> float).
template <class T, int R, class Index>
struct TensorReader {
  using value_type = compute_t<T>;
  const T* data;
  Index strides[R > 0 ? R : 1];
  ET_HD value_type linear(Index i) const { return static_cast<value_type>(data[i]); }
  ET_HD value_type strided(Index, const Coord<R, Index>& c) const {
    return static_cast<value_type>(data[dot<R, Index>(c, strides)]);
  }
  template <int V>
  ET_HD Vec<value_type, V> vector(Index i) const {
    const Vec<T, V> loaded = *reinterpret_cast<const Vec<T, V>*>(data + i);  // one wide load of V elements
    if constexpr (std::is_same_v<value_type, T>) {
      return loaded;
    } else {
      Vec<value_type, V> converted;
ET_UNROLL
      for (int k = 0; k < V; ++k) converted.v[k] = static_cast<value_type>(loaded.v[k]);
      return converted;
    }
  }
};

template <class T>
struct ScalarReader {
  using value_type = T;
  T value;
  template <class Index>
  ET_HD T linear(Index) const { return value; }
  template <class Index, class C>
  ET_HD T strided(Index, const C&) const { return value; }
  template <int V, class Index>
  ET_HD Vec<T, V> vector(Index) const {
    Vec<T, V> out;
    for (int k = 0; k < V; ++k) out.v[k] = value;
    return out;
  }
};

template <class Gen, int R, class Index>
struct GeneratorReader {
  using value_type = compute_t<typename Gen::value_type>;
  Gen gen;
  Index strides[R > 0 ? R : 1];  // the generator's own row-major strides, broadcast
  ET_HD value_type linear(Index i) const { return static_cast<value_type>(gen(static_cast<std::int64_t>(i))); }
  ET_HD value_type strided(Index, const Coord<R, Index>& c) const {
    return static_cast<value_type>(gen(static_cast<std::int64_t>(dot<R, Index>(c, strides))));
  }
  template <int V>
  ET_HD Vec<value_type, V> vector(Index i) const {
    Vec<value_type, V> out;
    for (int k = 0; k < V; ++k) out.v[k] = static_cast<value_type>(gen(static_cast<std::int64_t>(i) + k));
    return out;
  }
};

template <class Op, class... Readers>
struct MapReader {
  using value_type = decltype(Op{}(std::declval<typename Readers::value_type>()...));
  Pack<Readers...> children;

  template <class Index>
  ET_HD value_type linear(Index i) const {
    return linear_impl(i, std::index_sequence_for<Readers...>{});
  }
  template <class Index, class C>
  ET_HD value_type strided(Index i, const C& c) const {
    return strided_impl(i, c, std::index_sequence_for<Readers...>{});
  }
  template <int V, class Index>
  ET_HD Vec<value_type, V> vector(Index i) const {
    return vector_impl<V>(i, std::index_sequence_for<Readers...>{});
  }

 private:
  template <class Index, std::size_t... Is>
  ET_HD value_type linear_impl(Index i, std::index_sequence<Is...>) const {
    return Op{}(pack_get<Is>(children).linear(i)...);
  }
  template <class Index, class C, std::size_t... Is>
  ET_HD value_type strided_impl(Index i, const C& c, std::index_sequence<Is...>) const {
    return Op{}(pack_get<Is>(children).strided(i, c)...);
  }
  template <int V, class Index, std::size_t... Is>
  ET_HD Vec<value_type, V> vector_impl(Index i, std::index_sequence<Is...>) const {
    // All operands' loads are issued before any arithmetic.
    const Pack<Vec<typename Readers::value_type, V>...> loaded(pack_get<Is>(children).template vector<V>(i)...);
    Vec<value_type, V> out;
ET_UNROLL
    for (int k = 0; k < V; ++k) out.v[k] = Op{}(pack_get<Is>(loaded).v[k]...);
    return out;
  }
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

template <class Index, std::size_t R>
void copy_strides(Index (&out)[R > 0 ? R : 1], const std::array<std::int64_t, R>& strides) {
  for (std::size_t d = 0; d != R; ++d) out[d] = static_cast<Index>(strides[d]);
}

template <int OutR, class Index, class T, int R, class D>
auto make_reader(const Tensor<T, R, D>& t, const Shape<OutR>& out_shape) {
  TensorReader<T, OutR, Index> reader{t.data(), {}};
  copy_strides<Index, OutR>(reader.strides, broadcast_strides(t.shape(), t.strides(), out_shape));
  return reader;
}
template <int OutR, class Index, class T>
auto make_reader(const ScalarExpr<T>& s, const Shape<OutR>&) {
  return ScalarReader<compute_t<T>>{s.value};
}
template <int OutR, class Index, class Gen, int R, class D>
auto make_reader(const GeneratorExpr<Gen, R, D>& g, const Shape<OutR>& out_shape) {
  GeneratorReader<Gen, OutR, Index> reader{g.generator(), {}};
  copy_strides<Index, OutR>(reader.strides,
                            broadcast_strides(g.shape(), contiguous_strides(g.shape()), out_shape));
  return reader;
}
template <int OutR, class Index, class Op, class... Cs>
auto make_reader(const MapExpr<Op, Cs...>& e, const Shape<OutR>& out_shape) {
  return std::apply(
      [&](const Cs&... children) {
        return MapReader<Op, decltype(make_reader<OutR, Index>(children, out_shape))...>{
            Pack<decltype(make_reader<OutR, Index>(children, out_shape))...>(
                make_reader<OutR, Index>(children, out_shape)...)};
      },
      e.children());
}

template <class Index, class T, int R, class D>
Writer<T, R, Index> make_writer(const Tensor<T, R, D>& t) {
  Writer<T, R, Index> writer{t.data(), {}};
  copy_strides<Index, R>(writer.strides, t.strides());
  return writer;
}

/// Calls f on every tensor and generator leaf of an expression (scalars need no planning).
template <class F, class T, int R, class D>
void for_each_leaf(const Tensor<T, R, D>& t, F&& f) {
  f(t);
}
template <class F, class T>
void for_each_leaf(const ScalarExpr<T>&, F&&) {}
template <class F, class Gen, int R, class D>
void for_each_leaf(const GeneratorExpr<Gen, R, D>& g, F&& f) {
  f(g);
}
template <class F, class Op, class... Cs>
void for_each_leaf(const MapExpr<Op, Cs...>& e, F&& f) {
  std::apply([&](const Cs&... children) { (for_each_leaf(children, f), ...); }, e.children());
}

/// What an assignment needs to know before choosing a kernel.
struct ElementwisePlan {
  bool linear = true;            ///< every operand can be read at the output's linear index
  std::int64_t max_index = 0;    ///< largest index or element offset the evaluation touches
};

/// Inspects every leaf of an expression read in the index space `shape`: can it be read
/// at the row-major linear index (the linear path), and how large do offsets get?
template <std::size_t R, class E>
ElementwisePlan plan_reads(const std::array<std::int64_t, R>& shape, const E& expr) {
  ElementwisePlan plan;
  const auto dense = contiguous_strides(shape);
  plan.max_index = checked_numel(shape);
  auto reads_like_output = [&](const std::array<std::int64_t, R>& strides) {
    for (std::size_t d = 0; d != R; ++d)
      if (shape[d] != 1 && strides[d] != dense[d]) return false;
    return true;
  };
  for_each_leaf(expr, [&](const auto& leaf) {
    using Leaf = std::remove_cvref_t<decltype(leaf)>;
    if constexpr (is_tensor_v<Leaf>) {
      if (!leaf.defined()) throw Error("et: an undefined (default-constructed) tensor was used in an expression");
      const auto strides = broadcast_strides(leaf.shape(), leaf.strides(), shape);
      plan.linear = plan.linear && reads_like_output(strides);
      plan.max_index = std::max(plan.max_index, max_offset(shape, strides));
    } else {
      plan.linear = plan.linear && reads_like_output(broadcast_strides(leaf.shape(), contiguous_strides(leaf.shape()), shape));
    }
  });
  return plan;
}

/// The plan for evaluating `expr` into `dst`: the reads' plan, plus the destination's
/// own layout (the linear path also needs a contiguous destination).
template <class T, int R, class D, class E>
ElementwisePlan plan_elementwise(const Tensor<T, R, D>& dst, const E& expr) {
  ElementwisePlan plan = plan_reads(dst.shape(), expr);
  plan.linear = plan.linear && dst.is_contiguous();
  plan.max_index = std::max(plan.max_index, max_offset(dst.shape(), dst.strides()));
  return plan;
}

/// Runs f(Index{}) with Index = int32_t when every index fits below `limit`, else int64_t.
template <class F>
decltype(auto) with_index_type(bool fits_int32, F&& f) {
  if (fits_int32) return f(std::int32_t{});
  return f(std::int64_t{});
}

}  // namespace et::detail

namespace et::detail {

/// Row-major coordinate of linear index i in `extents`.
template <int R, class Index>
ET_HD Coord<R, Index> unravel(Index i, const Coord<R, Index>& extents) {
  Coord<R, Index> c{};
ET_UNROLL
  for (int d = R - 1; d >= 0; --d) {
    c.c[d] = i % extents.c[d];
    i /= extents.c[d];
  }
  return c;
}

template <class Index, std::size_t R>
Coord<static_cast<int>(R), Index> to_coord(const std::array<std::int64_t, R>& values) {
  Coord<static_cast<int>(R), Index> c{};
  for (std::size_t d = 0; d != R; ++d) c.c[d] = static_cast<Index>(values[d]);
  return c;
}

}  // namespace et::detail
