// The random op-gradient family's indexing operations, scans and joins
// (random_op_grad_cases.hpp has the method).
#pragma once

#include "random_op_grad_setup.hpp"

namespace test::op_grad {

// --- Indexing, scans, joins ---------------------------------------------------------------------

struct Gather : OpCase {
  static constexpr const char* name = "gather(x, axis, index)";
  int axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng), index(3);
    axis = any_axis(rng, 3);
    const std::size_t a = normalized(axis, 3);
    shape[a] = between(rng, 1, 5);
    for (std::size_t d = 0; d < 3; ++d) index[d] = d == a ? any_extent(rng) : between(rng, 0, shape[d]);
    s.add(shape, rng);
    s.add_index(index, rng, 0, shape[a] - 1);
    s.note("axis " + std::to_string(axis) + ", index " + extents_text(index));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::gather(e.template input<3>(0), axis, e.template index<3>()));
  }
};

struct IndexSelect : OpCase {
  static constexpr const char* name = "index_select(x, axis, index)";
  int axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    axis = any_axis(rng, 3);
    const std::size_t a = normalized(axis, 3);
    shape[a] = between(rng, 1, 5);
    s.add(shape, rng);
    s.add_index({between(rng, 0, 6)}, rng, 0, shape[a] - 1);
    s.note("axis " + std::to_string(axis) + ", " + std::to_string(s.index.size()) + " indices");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::index_select(e.template input<3>(0), axis, e.template index<1>()));
  }
};

struct Embedding : OpCase {
  static constexpr const char* name = "embedding(table [V, E], tokens [B, L])";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const std::int64_t rows = between(rng, 1, 5);
    s.add({rows, any_extent(rng)}, rng);
    s.add_index({any_extent(rng), any_extent(rng)}, rng, 0, rows - 1);
    s.note("tokens " + extents_text(s.index_shape));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::embedding(e.template input<2>(0), e.template index<2>()));
  }
};

struct Flip : OpCase {
  static constexpr const char* name = "flip(x, axes)";
  int count = 1;
  std::array<int, 3> axes{0, 1, 2};
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    count = static_cast<int>(between(rng, 1, 3));
    std::shuffle(axes.begin(), axes.end(), rng);
    for (int& a : axes) a = coin(rng) ? a - 3 : a;
    std::string text = "axes";
    for (int k = 0; k < count; ++k) text += " " + std::to_string(axes[static_cast<std::size_t>(k)]);
    s.note(text);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (count == 1) e.output(et::flip(x, axes[0]));
    else if (count == 2) e.output(et::flip(x, {axes[0], axes[1]}));
    else e.output(et::flip(x, {axes[0], axes[1], axes[2]}));
  }
};

struct ScatterAdd : OpCase {
  static constexpr const char* name = "scatter_add(x, axis, index, src)";
  int axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng), index(3), source(3);
    axis = any_axis(rng, 3);
    const std::size_t a = normalized(axis, 3);
    shape[a] = between(rng, 1, 5);
    for (std::size_t d = 0; d < 3; ++d) {
      index[d] = d == a ? any_extent(rng) : between(rng, 0, shape[d]);
      source[d] = index[d] + between(rng, 0, 1);
    }
    s.add(shape, rng);
    s.add(source, rng);
    s.add_index(index, rng, 0, shape[a] - 1);
    s.note("axis " + std::to_string(axis) + ", index " + extents_text(index));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::scatter_add(e.template input<3>(0), axis, e.template index<3>(), e.template input<3>(1)));
  }
};

struct Cumsum : OpCase {
  static constexpr const char* name = "cumsum(x, axis)";
  int axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    axis = any_axis(rng, 3);
    s.note("axis " + std::to_string(axis));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::cumsum(e.template input<3>(0), axis));
  }
};

/// sort(x, axis, descending).values, or topk(x, k, axis, largest).values.
struct SortTopk : OpCase {
  static constexpr const char* name = "sort(x, axis, descending).values or topk(x, k, axis, largest).values";
  int axis = 0;
  bool topk = false, flag = false;
  std::int64_t k = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents shape = any_shape(rng);
    s.add(shape, rng);
    axis = any_axis(rng, 3);
    topk = coin(rng), flag = coin(rng);
    k = between(rng, 0, shape[normalized(axis, 3)]);
    s.note(std::string(topk ? "topk, k " + std::to_string(k) + (flag ? ", largest" : ", smallest")
                            : std::string(flag ? "sort, descending" : "sort, ascending")) +
           ", axis " + std::to_string(axis));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (topk) e.output(et::topk(x, k, axis, flag).values);
    else e.output(et::sort(x, axis, flag).values);
  }
};

struct Cat : OpCase {
  static constexpr const char* name = "cat({a, b[, c]}, axis)";
  int axis = 0, parts = 2;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents shape = any_shape(rng);
    axis = any_axis(rng, 3);
    parts = static_cast<int>(between(rng, 2, 3));
    for (int p = 0; p < parts; ++p) {
      Extents part = shape;
      part[normalized(axis, 3)] = any_extent(rng);
      s.add(part, rng);
    }
    s.note("axis " + std::to_string(axis));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    if (parts == 2) e.output(et::cat({a, b}, axis));
    else e.output(et::cat({a, b, e.template input<3>(2)}, axis));
  }
};

struct Stack : OpCase {
  static constexpr const char* name = "stack({a, b}, axis)";
  int axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents shape = any_shape(rng);
    s.add(shape, rng);
    s.add(shape, rng);
    axis = static_cast<int>(between(rng, -4, 3));
    s.note("axis " + std::to_string(axis));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::stack({e.template input<3>(0), e.template input<3>(1)}, axis));
  }
};

struct Pad : OpCase {
  static constexpr const char* name = "pad(x, widths, value)";
  std::array<std::array<std::int64_t, 2>, 3> widths{};
  double value = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    std::string text = "widths";
    for (auto& w : widths) {
      w = {between(rng, 0, 2), between(rng, 0, 2)};
      text += " {" + std::to_string(w[0]) + ", " + std::to_string(w[1]) + "}";
    }
    value = static_cast<double>(between(rng, -2, 2));
    s.note(text + ", value " + std::to_string(value));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::pad<double, 3, D>(e.template input<3>(0), widths, value));
  }
};

}  // namespace test::op_grad
