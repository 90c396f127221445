// The random op-gradient family's machinery (random_op_grad_cases.hpp has the method):
// shapes, axes and layouts drawn for a case, its leaves' values on one grid, the
// evaluation of L = sum(op(inputs) * w) on a device, and what an operation adds to a draw.
#pragma once

#include "random_cases.hpp"

#include <et/nn.hpp>

#include <cfloat>
#include <functional>
#include <numeric>
#include <optional>

namespace test::op_grad {

using Extents = std::vector<std::int64_t>;

inline std::int64_t product_of(const Extents& shape) {
  std::int64_t n = 1;
  for (const std::int64_t e : shape) n *= e;
  return n;
}

inline std::string extents_text(const Extents& shape) {
  std::string out = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

template <int R>
std::array<std::int64_t, R> fixed(const Extents& shape) {
  if (shape.size() != std::size_t(R)) throw et::Error("test: an input of rank " + std::to_string(shape.size()) +
                                                      " read as rank " + std::to_string(R));
  std::array<std::int64_t, R> out{};
  for (int d = 0; d < R; ++d) out[static_cast<std::size_t>(d)] = shape[static_cast<std::size_t>(d)];
  return out;
}

/// lo..hi, each equally likely.
inline std::int64_t between(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}
inline bool coin(std::mt19937_64& rng) { return rng() % 2 == 0; }
/// An extent of 0 to 5, 1 twice as often.
inline std::int64_t any_extent(std::mt19937_64& rng) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 4, 5};
  return extents[rng() % 7];
}
inline Extents any_shape(std::mt19937_64& rng, int rank = 3) {
  Extents shape(static_cast<std::size_t>(rank));
  for (auto& e : shape) e = any_extent(rng);
  return shape;
}
inline Extents some_shape(std::mt19937_64& rng, int rank = 3) {
  Extents shape(static_cast<std::size_t>(rank));
  for (auto& e : shape) e = between(rng, 1, 5);
  return shape;
}
/// `shape` with each axis 1 one time in three (an operand broadcast against it).
inline Extents broadcast_of(Extents shape, std::mt19937_64& rng) {
  for (auto& e : shape) e = rng() % 3 == 0 ? 1 : e;
  return shape;
}
/// An axis of `rank`, negative (counted from the end) half the time.
inline int any_axis(std::mt19937_64& rng, int rank) {
  const int axis = static_cast<int>(rng() % static_cast<std::uint64_t>(rank));
  return coin(rng) ? axis - rank : axis;
}
inline std::size_t normalized(int axis, std::size_t rank) {
  return static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(rank) : axis);
}

/// An input of an operation: its shape, how it is read from its leaf (itself, permuted, or
/// every other element along `axis`), the leaf's values (row-major) and their range.
struct OpInput {
  Extents shape, base;  // base: the leaf's
  int kind = 0, axis = 0;
  std::vector<int> order;  // kind 1: the input is base.permute(order)
  double lo = -3, hi = 3;
  bool differentiable = true;
  std::vector<double> values;

  std::string text() const {
    std::string out = extents_text(shape);
    if (kind == 1) {
      out += " permuted {";
      for (std::size_t d = 0; d < order.size(); ++d) out += (d ? ", " : "") + std::to_string(order[d]);
      out += "}";
    }
    if (kind == 2) out += " every other element along axis " + std::to_string(axis);
    return out + (differentiable ? "" : " (no gradient)");
  }
  /// The leaf element that the input's element `flat` (row-major) reads.
  std::size_t leaf_offset(std::int64_t flat) const {
    Extents i(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
      i[d] = flat % shape[d];
      flat /= shape[d];
    }
    Extents b = i;
    if (kind == 1) for (std::size_t d = 0; d < i.size(); ++d) b[static_cast<std::size_t>(order[d])] = i[d];
    if (kind == 2) b[static_cast<std::size_t>(axis)] = 2 * i[static_cast<std::size_t>(axis)];
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < b.size(); ++d) offset = offset * base[d] + b[d];
    return static_cast<std::size_t>(offset);
  }
  /// The input's values, row-major.
  std::vector<double> logical() const {
    std::vector<double> out;
    for (std::int64_t k = 0; k < product_of(shape); ++k) out.push_back(values[leaf_offset(k)]);
    return out;
  }
};

/// A case's inputs, its int64 tensor (indices, labels, a mask) and its parameters in words.
struct OpSetup {
  std::vector<OpInput> inputs;
  std::vector<std::int64_t> index;
  Extents index_shape;
  std::int64_t cells = 0;  // of the values' grid
  std::string text;

  /// Adds an input of `shape` read through a random layout, its values in [lo, hi).
  void add(const Extents& shape, std::mt19937_64& rng, double lo = -3, double hi = 3, bool differentiable = true) {
    OpInput in;
    in.shape = in.base = shape;
    in.lo = lo, in.hi = hi, in.differentiable = differentiable;
    const int rank = static_cast<int>(shape.size());
    in.kind = rank == 0 ? 0 : static_cast<int>(rng() % 3);
    in.axis = rank == 0 ? 0 : static_cast<int>(rng() % static_cast<std::uint64_t>(rank));
    in.order.resize(shape.size());
    std::iota(in.order.begin(), in.order.end(), 0);
    if (in.kind == 1) {
      std::shuffle(in.order.begin(), in.order.end(), rng);
      for (std::size_t d = 0; d < shape.size(); ++d) in.base[static_cast<std::size_t>(in.order[d])] = shape[d];
    }
    if (in.kind == 2) in.base[static_cast<std::size_t>(in.axis)] *= 2;
    inputs.push_back(in);
  }
  /// An int64 tensor of `shape`, each value drawn from lo..hi.
  void add_index(const Extents& shape, std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
    index_shape = shape;
    index.resize(static_cast<std::size_t>(product_of(shape)));
    for (auto& v : index) v = between(rng, lo, hi);
  }
  /// A boundary between two cells of input k's grid, near lo + fraction (hi - lo): no value
  /// comes within a quarter cell of it.
  double boundary(std::size_t k, double fraction) const {
    const OpInput& in = inputs[k];
    return in.lo + std::round(fraction * static_cast<double>(cells)) * (in.hi - in.lo) / static_cast<double>(cells);
  }
  void note(const std::string& words) { text += (text.empty() ? "" : ", ") + words; }
};

/// Draws every leaf value: distinct cells of one grid (an even number of them, so that 0
/// is a boundary, never a value) in random order, each value within a quarter cell of
/// its cell's centre.
inline void fill_values(OpSetup& s, std::mt19937_64& rng) {
  std::int64_t total = 0;
  for (const auto& in : s.inputs) total += product_of(in.base);
  s.cells = std::max<std::int64_t>(64, total + total % 2);
  std::vector<std::int64_t> cells(static_cast<std::size_t>(s.cells));
  std::iota(cells.begin(), cells.end(), 0);
  std::shuffle(cells.begin(), cells.end(), rng);
  std::uniform_real_distribution<double> jitter(-0.25, 0.25);
  std::size_t next = 0;
  for (auto& in : s.inputs) {
    const double width = (in.hi - in.lo) / static_cast<double>(s.cells);
    in.values.resize(static_cast<std::size_t>(product_of(in.base)));
    for (double& v : in.values) v = in.lo + (static_cast<double>(cells[next++]) + 0.5 + jitter(rng)) * width;
  }
}

/// One evaluation of L = sum(op(inputs) * w) on D (recorded and differentiated, or under
/// NoGradGuard). w is drawn on the first evaluation of a case, when the output's size is
/// known, and kept for the others.
template <class D>
class OpEval {
 public:
  OpEval(D device, const OpSetup& setup, std::vector<double>& w, std::mt19937_64& rng, bool backward)
      : dev(device), setup(setup), w_(w), rng_(rng), backward_(backward), readers_(setup.inputs.size()) {
    if (!backward) no_grad_.emplace();
  }

  /// Input k, of rank R: its leaf made on D (requiring grad when differentiated), read
  /// through its layout.
  template <int R>
  et::Tensor<double, R, D> input(std::size_t k) {
    const OpInput& in = setup.inputs.at(k);
    auto leaf = et::from_vector(dev, in.values, fixed<R>(in.base));
    if (backward_ && in.differentiable) {
      leaf.requires_grad_(true);
      readers_[k] = [leaf, n = in.values.size()] {
        const auto g = leaf.grad();
        if (!g.defined()) return std::vector<double>(n, 0.0);  // no path from L: zero
        if (g.shape() != leaf.shape()) throw et::Error("test: a leaf's gradient is not of its shape");
        const auto v = g.to_vector();
        return std::vector<double>(v.begin(), v.end());
      };
    }
    if constexpr (R >= 1) {
      if (in.kind == 1) {
        std::array<int, R> order{};
        for (int d = 0; d < R; ++d) order[static_cast<std::size_t>(d)] = in.order[static_cast<std::size_t>(d)];
        return leaf.permute(order);
      }
      if (in.kind == 2) return leaf.slice(in.axis, 0, 2 * in.shape[static_cast<std::size_t>(in.axis)], 2);
    }
    return leaf;
  }
  /// The case's int64 tensor, of rank R.
  template <int R>
  et::Tensor<std::int64_t, R, D> index() const {
    return et::from_vector(dev, setup.index, fixed<R>(setup.index_shape));
  }
  /// L from the operation's result (on D, or on the host after a to()); with backward,
  /// the leaves' gradients and sum(|y| * w) too.
  template <int R, class DO>
  void output(const et::Tensor<double, R, DO>& y) {
    if (w_.size() != static_cast<std::size_t>(y.numel())) {
      std::uniform_real_distribution<double> weight(0.5, 1.5);
      w_.resize(static_cast<std::size_t>(y.numel()));
      for (double& x : w_) x = weight(rng_);
    }
    const auto wt = et::from_vector(DO{}, w_, y.shape());
    const auto l = et::sum(y * wt);
    loss = l.item();
    if (!backward_) return;
    {
      et::NoGradGuard no_grad;
      scale = et::sum(et::abs(y) * wt).item();
    }
    if (l.requires_grad()) l.backward();  // (not when the result is empty and nothing was recorded)
    grads.resize(readers_.size());
    for (std::size_t k = 0; k < readers_.size(); ++k)
      if (readers_[k]) grads[k] = readers_[k]();
  }

  D dev;
  const OpSetup& setup;
  double loss = 0, scale = 0;
  std::vector<std::vector<double>> grads;  // per input (empty for one without gradient)

 private:
  std::vector<double>& w_;
  std::mt19937_64& rng_;
  bool backward_;
  std::vector<std::function<std::vector<double>()>> readers_;
  std::optional<et::NoGradGuard> no_grad_;
};

/// What an operation may add to the draw: exact values after it (adjust), and a test that
/// the values keep away from its kinks (acceptable; drawn again otherwise).
struct OpCase {
  void adjust(OpSetup&, std::mt19937_64&) const {}
  bool acceptable(const OpSetup&) const { return true; }
};

}  // namespace test::op_grad
