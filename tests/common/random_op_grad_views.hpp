// The random op-gradient family's views and copies, and the writes recorded on a computed
// tensor (random_op_grad_cases.hpp has the method).
#pragma once

#include "random_op_grad_setup.hpp"

namespace test::op_grad {

// --- Views and copies -----------------------------------------------------------------------

struct Permute : OpCase {
  static constexpr const char* name = "x.permute(order) or x.transpose(i, j)";
  std::array<int, 3> order{0, 1, 2};
  bool transpose = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    std::shuffle(order.begin(), order.end(), rng);
    transpose = coin(rng);
    if (transpose) {
      order[0] = any_axis(rng, 3), order[1] = any_axis(rng, 3);
      s.note("transpose(" + std::to_string(order[0]) + ", " + std::to_string(order[1]) + ")");
    } else {
      s.note("permute({" + std::to_string(order[0]) + ", " + std::to_string(order[1]) + ", " +
             std::to_string(order[2]) + "})");
    }
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    e.output(transpose ? x.transpose(order[0], order[1]) : x.permute(order));
  }
};

/// A slice or a select of a rank-3 tensor along a random axis (negative when drawn so), its
/// parameters noted in the case's words.
struct SliceOrSelect {
  int axis = 0;
  bool select = false;
  std::int64_t begin = 0, end = 0, step = 1;
  /// Draws it on `shape` (a select's axis drawn again, 1 to 5 long), with bounds counted
  /// from the end half the time when `from_end`; returns the shape of the part it picks.
  Extents draw_on(Extents& shape, OpSetup& s, std::mt19937_64& rng, bool from_end) {
    axis = any_axis(rng, 3);
    const std::size_t a = normalized(axis, 3);
    select = coin(rng);
    if (select) shape[a] = between(rng, 1, 5);
    const std::int64_t n = shape[a];
    Extents part = shape;
    if (select) {
      begin = between(rng, from_end ? -n : 0, n - 1);
      part.erase(part.begin() + static_cast<std::ptrdiff_t>(a));
      s.note("select(" + std::to_string(axis) + ", " + std::to_string(begin) + ")");
    } else {
      begin = between(rng, 0, n), end = between(rng, begin, n), step = between(rng, 1, 3);
      part[a] = (end - begin + step - 1) / step;
      if (from_end && end < n && coin(rng)) begin -= n, end -= n;  // counted from the end (an end of 0 would mean 0)
      s.note("slice(" + std::to_string(axis) + ", " + std::to_string(begin) + ", " + std::to_string(end) + ", " +
             std::to_string(step) + ")");
    }
    return part;
  }
};

struct SliceSelect : OpCase, SliceOrSelect {
  static constexpr const char* name = "x.slice(axis, begin, end, step) or x.select(axis, index)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    draw_on(shape, s, rng, true);
    s.add(shape, rng);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (select) e.output(x.select(axis, begin));
    else e.output(x.slice(axis, begin, end, step));
  }
};

struct Reshape : OpCase {
  static constexpr const char* name = "x.reshape / view / unsqueeze / squeeze";
  int mode = 0, axis = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    mode = static_cast<int>(rng() % 5);
    static constexpr const char* what[] = {"reshape({s0 * s1, s2})", "reshape({s0, s1 * s2})",
                                           "contiguous().view({numel})", "unsqueeze(axis)", "squeeze(axis)"};
    s.note(what[mode]);
    if (mode == 3) axis = static_cast<int>(between(rng, -4, 3));
    if (mode == 4) axis = any_axis(rng, 3), shape[normalized(axis, 3)] = 1;
    if (mode >= 3) s.note("axis " + std::to_string(axis));
    s.add(shape, rng);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    using A2 = std::array<std::int64_t, 2>;
    if (mode == 0) e.output(x.reshape(A2{x.size(0) * x.size(1), x.size(2)}));
    else if (mode == 1) e.output(x.reshape(A2{x.size(0), x.size(1) * x.size(2)}));
    else if (mode == 2) e.output(x.contiguous().view(std::array<std::int64_t, 1>{x.numel()}));
    else if (mode == 3) e.output(x.unsqueeze(axis));
    else e.output(x.squeeze(axis));
  }
};

struct Expand : OpCase {
  static constexpr const char* name = "x.expand(shape): axes of extent 1 stretched, -1 kept, a new leading axis";
  Extents target;
  bool new_axis = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng), shape = broadcast_of(full, rng);
    s.add(shape, rng);
    new_axis = coin(rng);
    target = full;
    for (std::size_t d = 0; d < 3; ++d)
      if (shape[d] == full[d] && coin(rng)) target[d] = -1;
    if (new_axis) target.insert(target.begin(), any_extent(rng));
    s.note("to " + extents_text(target));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (new_axis) e.output(x.expand(fixed<4>(target)));
    else e.output(x.expand(fixed<3>(target)));
  }
};

struct Copies : OpCase {
  static constexpr const char* name = "x.clone(), x.contiguous(), x.to(cpu).to(device)";
  int mode = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    mode = static_cast<int>(rng() % 3);
    s.note(mode == 0 ? "clone" : mode == 1 ? "contiguous" : "to");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (mode == 0) e.output(x.clone());
    else if (mode == 1) e.output(x.contiguous());
    else e.output(x.to(et::cpu).to(e.dev));
  }
};

// --- Writes recorded on a computed tensor -----------------------------------------------------

/// h = 2 a, then sin(c) written into h.slice(...) or h.select(...); L of h.
struct WriteIntoView : OpCase, SliceOrSelect {
  static constexpr const char* name = "h = 2 a; h.slice(axis, begin, end, step) or h.select(axis, i) = sin(c)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    const Extents part = draw_on(shape, s, rng, false);
    s.add(shape, rng);
    s.add(part, rng);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    auto h = et::eval(2.0 * e.template input<3>(0));
    if (select) h.select(axis, begin) = et::sin(e.template input<2>(1));
    else h.slice(axis, begin, end, step) = et::sin(e.template input<3>(1));
    e.output(h);
  }
};

/// h = a * b, then h += tanh(a), -= sigmoid(b), *= sigmoid(a), /= 2 + square(b), or
/// h = h * a + b.
struct Compound : OpCase {
  static constexpr const char* name = "h = a * b; h += tanh(a) | -= sigmoid(b) | *= sigmoid(a) | /= 2 + square(b) | "
                                      "h = h * a + b";
  int mode = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng);
    s.add(full, rng);
    s.add(broadcast_of(full, rng), rng);
    mode = static_cast<int>(rng() % 5);
    static constexpr const char* what[] = {"+=", "-=", "*=", "/=", "h = h * a + b"};
    s.note(what[mode]);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    auto h = et::eval(a * b);
    if (mode == 0) h += et::tanh(a);
    else if (mode == 1) h -= et::sigmoid(b);
    else if (mode == 2) h *= et::sigmoid(a);
    else if (mode == 3) h /= 2.0 + et::square(b);
    else h = h * a + b;
    e.output(h);
  }
};

}  // namespace test::op_grad
