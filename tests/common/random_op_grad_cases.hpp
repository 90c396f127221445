// Randomized gradient checks of every differentiable operation of etensor (issue 47), shared
// by the CPU and GPU tests; random_grad_cases.hpp checks seven fixed functions of them in the
// four floating types, this family checks each operation on its own, in double precision.
// Each case takes the next operation round-robin (so each of the 62 below gets about
// cases / 62 cases), draws shapes (extents 0 to 5: empty, 1 and odd ones), broadcasts,
// parameters (axes, negative ones too, steps, k, indices with repeats, options) and, for
// every input, a layout of its leaf (contiguous, permuted, every other element of a leaf
// twice as long along one axis), then checks L = sum(op(inputs) * w), w fixed and random
// in [0.5, 1.5], by directional central differences (PyTorch's gradcheck fast mode):
// (L(x + h u) - L(x - h u)) / 2h against sum_k <grad_k, u_k> for random u_k, first with
// every input moved together, then each input alone, so that the gradients of two inputs
// cannot make up for each other's error; within 1e-6 relative, plus the rounding of L (a few
// ulps of sum |op * w|) over 2h. A sign flip, a missing sum over a broadcast axis, a
// transposed or misplaced gradient is off by O(1).
// Kinks are kept out of reach of h: the values of all the leaves of a case are distinct
// points of one grid (cells (hi - lo) / M wide for M >= the number of values, each value
// within a quarter cell of its cell's centre, never 0), so maxima, sorts, relu, abs,
// clamp and comparisons never tie; scalar thresholds lie on cell boundaries; relu after a
// product is drawn again where a pre-activation comes within 1e-3 of 0.
//
// The differentiable operations (the library's, with where each is defined), all covered:
//   functors (expr/functors.hpp, partial<K> each; operators.hpp): + - * / (tensor and
//     scalar operands, broadcast on either side, an operand of lower rank), unary -, abs,
//     square, relu, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, sigmoid, gelu,
//     gelu_tanh, pow (tensor and scalar exponent), maximum, minimum, clamp (tensor and
//     scalar bounds, hi < lo too), where (an int64 mask, a comparison of the inputs),
//     cast<double>; fused expressions with a leaf used several times, into a new tensor or
//     a permuted destination (derivatives/fused.hpp)
//   reductions (ops/reduce.hpp, derivatives/reduce.hpp): sum, mean, max, min, prod (exact
//     zeros, one or two), norm: over all elements, along an axis, with keepdim
//   ops/softmax.hpp: softmax, log_softmax, logsumexp (with keepdim or not)
//   views (tensor.hpp, autograd/views.hpp): permute, transpose, slice (steps, negative
//     bounds), select, reshape (view or copy), view, unsqueeze, squeeze, expand (stretched
//     axes and a new one), clone, contiguous, to (a round trip through the host)
//   writes recorded on a computed tensor: an expression assigned into a slice or a select
//     of it (CopySlices), += -= *= /= and h = expr(h) (the overwritten path)
//   ops/index.hpp: gather, index_select, embedding, flip, scatter_add (input and source)
//   ops/scan.hpp: cumsum, sort's values (ascending, descending), topk's values (largest,
//     smallest)
//   ops/join.hpp: cat (2 or 3 parts, empty ones too), stack, pad
//   matmul (ops/linalg.hpp, derivatives/linalg.hpp): ranks 2 and 3 on either side, broadcast
//     batches, transposed and strided operands, products inside an expression;
//     act(matmul(a, w) + bias) as one node (derivatives/linear.hpp): bias first or last, no
//     bias, relu, gelu_tanh; nn::Linear on [N, in] and [B, N, in]
//   ops/nn.hpp: conv2d (bias or not; stride, padding, dilation, groups; nchw and nhwc),
//     max_pool2d, avg_pool2d (padding counted or not)
//   nn/: BatchNorm2d (training: batch statistics; eval: running ones), Dropout (its mask
//     fixed by its seed), mse_loss (both sides), cross_entropy
// Left out, with why:
//   not differentiable (integer or bool results, or constants): comparisons, argmax,
//     argmin, all, any, sort's and topk's indices, one_hot, cumsum of integers, cast to an
//     integer type, creation (zeros, full, arange, rand, from_vector...), detach (stops the
//     gradient by definition); a float mask of where, whose gradient is 0 but whose
//     function jumps where the mask crosses 0
//   cast to float, half or bfloat16: the differences would see the rounding to U (Cast's
//     derivative, 1 for every U, is checked here through cast<double>)
//   the ReLU, Sigmoid, Tanh, GELU, Flatten, Conv2d, MaxPool2d and AvgPool2d modules: their
//     forward is the functor or function checked here
//   DeviceSet::scatter/gather: several devices (tests/gpu/test_data_parallel.cu)
//   Dropout's random mask: a new mask on every call (fixed by a new module per evaluation
//     here); logsumexp of an empty row (-inf)
//   to(pinned): the copy node of to(), checked through the host; it needs page-locked memory
//   cumprod, masked_fill / masked_select, bmm, layer_norm, norm with p != 2: not in the
//     library (where and rank-3 matmul are)
//
//   ET_RANDOM_CASES  cases (default 10000: the CI's quick mode; gpu-check runs more)
//   ET_RANDOM_SEED   the seed of the run (default 20261123); this family uses it + 9
//   ET_RANDOM_CASE   run this case alone (each case has a generator of its own, seeded
//                    from the seed and its number; a failure prints both)
#pragma once

#include "random_cases.hpp"

#include <et/nn.hpp>

#include <cfloat>
#include <functional>
#include <numeric>
#include <optional>

namespace test {

namespace op_grad {

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

// --- Elementwise functors ----------------------------------------------------------------

template <class Fn>
struct Unary : OpCase {
  static constexpr const char* name = Fn::name;
  void draw(OpSetup& s, std::mt19937_64& rng) { s.add(any_shape(rng), rng, Fn::lo, Fn::hi); }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::eval(Fn::apply(e.template input<3>(0))));
  }
};
#define ET_TEST_UNARY(TYPE, TEXT, LO, HI, ...)                     \
  struct TYPE {                                                    \
    static constexpr const char* name = TEXT;                      \
    static constexpr double lo = LO, hi = HI;                      \
    template <class X>                                             \
    static auto apply(const X& x) { return __VA_ARGS__; }          \
  };
ET_TEST_UNARY(NegateFn, "-x", -3, 3, -x)
ET_TEST_UNARY(AbsFn, "abs(x)", -3, 3, et::abs(x))
ET_TEST_UNARY(SquareFn, "square(x)", -3, 3, et::square(x))
ET_TEST_UNARY(ReluFn, "relu(x)", -3, 3, et::relu(x))
ET_TEST_UNARY(ExpFn, "exp(x)", -3, 2, et::exp(x))
ET_TEST_UNARY(LogFn, "log(x)", 0.25, 3, et::log(x))
ET_TEST_UNARY(Log1pFn, "log1p(x)", -0.75, 3, et::log1p(x))
ET_TEST_UNARY(SqrtFn, "sqrt(x)", 0.25, 3, et::sqrt(x))
ET_TEST_UNARY(RsqrtFn, "rsqrt(x)", 0.25, 3, et::rsqrt(x))
ET_TEST_UNARY(SinFn, "sin(x)", -3, 3, et::sin(x))
ET_TEST_UNARY(CosFn, "cos(x)", -3, 3, et::cos(x))
ET_TEST_UNARY(TanhFn, "tanh(x)", -3, 3, et::tanh(x))
ET_TEST_UNARY(SigmoidFn, "sigmoid(x)", -3, 3, et::sigmoid(x))
ET_TEST_UNARY(GeluFn, "gelu(x)", -3, 3, et::gelu(x))
ET_TEST_UNARY(GeluTanhFn, "gelu_tanh(x)", -3, 3, et::gelu_tanh(x))
ET_TEST_UNARY(PowScalarFn, "pow(x, 2.5) + pow(x, -1.5)", 0.25, 3, et::pow(x, 2.5) + et::pow(x, -1.5))
#undef ET_TEST_UNARY

/// a op b with either side broadcast against the other.
template <class Fn>
struct Binary : OpCase {
  static constexpr const char* name = Fn::name;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng), part = broadcast_of(full, rng);
    const bool left = coin(rng);
    s.add(left ? part : full, rng, Fn::lo0, Fn::hi0);
    s.add(left ? full : part, rng, Fn::lo1, Fn::hi1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::eval(Fn::apply(e.template input<3>(0), e.template input<3>(1))));
  }
};
#define ET_TEST_BINARY(TYPE, TEXT, LO0, HI0, LO1, HI1, ...)       \
  struct TYPE {                                                    \
    static constexpr const char* name = TEXT;                      \
    static constexpr double lo0 = LO0, hi0 = HI0, lo1 = LO1, hi1 = HI1; \
    template <class X>                                             \
    static auto apply(const X& a, const X& b) { return __VA_ARGS__; } \
  };
ET_TEST_BINARY(AddFn, "a + b", -3, 3, -3, 3, a + b)
ET_TEST_BINARY(SubFn, "a - b", -3, 3, -3, 3, a - b)
ET_TEST_BINARY(MulFn, "a * b", -3, 3, -3, 3, a * b)
ET_TEST_BINARY(DivFn, "a / b", -3, 3, 0.5, 3, a / b)
ET_TEST_BINARY(PowFn, "pow(a, b)", 0.25, 2.5, -2, 2, et::pow(a, b))
ET_TEST_BINARY(MaximumFn, "maximum(a, b)", -3, 3, -3, 3, et::maximum(a, b))
ET_TEST_BINARY(MinimumFn, "minimum(a, b)", -3, 3, -3, 3, et::minimum(a, b))
#undef ET_TEST_BINARY

/// Scalars on either side of each operator, a leaf read three times (one node, one
/// gradient written by the first of its reads), an operand of rank 2 (broadcast along the
/// leading axis), cast<double>, assigned into a new tensor or a permuted destination.
struct Fused : OpCase {
  static constexpr const char* name =
      "(2 - a) * b + sin(a) * c / 4 - 1.5 / (1 + square(c)) + cast<double>(a) * 0.5, c of rank 2";
  bool into_permuted = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng), c = broadcast_of(full, rng);
    s.add(full, rng);
    s.add(broadcast_of(full, rng), rng);
    s.add({c[1], c[2]}, rng);
    into_permuted = coin(rng);
    if (into_permuted) s.note("into a permuted destination");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    const auto c = e.template input<2>(2);
    const auto expr = (2.0 - a) * b + et::sin(a) * c / 4.0 - 1.5 / (1.0 + et::square(c)) + et::cast<double>(a) * 0.5;
    if (!into_permuted) return e.output(et::eval(expr));
    auto out = et::empty<double>(e.dev, std::array<std::int64_t, 3>{a.size(2), a.size(1), a.size(0)}).permute({2, 1, 0});
    out = expr;
    e.output(out);
  }
};

/// clamp(x, lo, hi), bounds broadcast tensors (hi < lo at places) or scalars.
struct Clamp : OpCase {
  static constexpr const char* name = "clamp(x, lo, hi)";
  bool scalar_bounds = false;
  double lo_at = 0, hi_at = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng);
    s.add(full, rng);
    scalar_bounds = rng() % 3 == 0;
    if (scalar_bounds) {
      std::uniform_real_distribution<double> where(0.1, 0.9);
      lo_at = where(rng), hi_at = where(rng);
      s.note("scalar bounds");
    } else {
      s.add(broadcast_of(full, rng), rng);
      s.add(broadcast_of(full, rng), rng);
    }
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (scalar_bounds) return e.output(et::eval(et::clamp(x, e.setup.boundary(0, lo_at), e.setup.boundary(0, hi_at))));
    e.output(et::eval(et::clamp(x, e.template input<3>(1), e.template input<3>(2))));
  }
};

/// where(mask, a, 2 b) with an int64 mask, or where(a > b, a * b, b - a).
struct Where : OpCase {
  static constexpr const char* name = "where(mask != 0, a, 2 b) or where(a > b, a * b, b - a)";
  bool compare = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng);
    compare = coin(rng);
    s.add(compare || coin(rng) ? full : broadcast_of(full, rng), rng);
    s.add(broadcast_of(full, rng), rng);
    if (compare) s.note("the comparison");
    else s.add_index(broadcast_of(full, rng), rng, 0, 1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    if (compare) return e.output(et::eval(et::where(a > b, a * b, b - a)));
    e.output(et::eval(et::where(e.template index<3>() != 0, a, 2.0 * b)));
  }
};

// --- Reductions ---------------------------------------------------------------------------

/// Fn over all elements (mode 0), along an axis (1) or along it with keepdim (2).
template <class Fn>
struct Reduction : OpCase {
  static constexpr const char* name = Fn::name;
  int mode = 0, axis = 0;
  int zeros = 0;  // prod: exact zeros among the values
  void draw(OpSetup& s, std::mt19937_64& rng) {
    mode = static_cast<int>(rng() % 3);
    axis = any_axis(rng, 3);
    Extents shape = any_shape(rng);
    if (Fn::needs_elements && mode == 0) shape = some_shape(rng);
    if (Fn::needs_elements) shape[normalized(axis, 3)] = between(rng, 1, 5);
    s.add(shape, rng, Fn::lo, Fn::hi);
    if (Fn::binary) s.add(broadcast_of(shape, rng), rng);
    s.note(mode == 0 ? "every element" : "axis " + std::to_string(axis) + (mode == 2 ? ", keepdim" : ""));
    if (Fn::zeros) zeros = static_cast<int>(rng() % 3);
  }
  void adjust(OpSetup& s, std::mt19937_64& rng) const {
    OpInput& x = s.inputs[0];
    const std::int64_t n = product_of(x.shape);
    for (int z = 0; z < zeros && n > 0; ++z) x.values[x.leaf_offset(between(rng, 0, n - 1))] = 0.0;
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    auto reduce = [&](const auto& arg) {
      if (mode == 0) e.output(Fn::all(arg));
      else if (mode == 1) e.output(Fn::along(arg, axis));
      else e.output(Fn::along(arg, axis, true));
    };
    if constexpr (Fn::binary) reduce(Fn::operand(x, e.template input<3>(1)));
    else reduce(x);
  }
};
#define ET_TEST_REDUCTION(TYPE, TEXT, FUNCTION, BINARY, NEEDS_ELEMENTS, ZEROS, LO, HI, ...) \
  struct TYPE {                                                                              \
    static constexpr const char* name = TEXT;                                                \
    static constexpr bool binary = BINARY, needs_elements = NEEDS_ELEMENTS, zeros = ZEROS;  \
    static constexpr double lo = LO, hi = HI;                                                \
    template <class X>                                                                       \
    static auto operand(const X& a, const X& b) { return __VA_ARGS__; }                      \
    template <class E>                                                                       \
    static auto all(const E& e) { return et::FUNCTION(e); }                                  \
    template <class E>                                                                       \
    static auto along(const E& e, int axis) { return et::FUNCTION(e, axis); }                \
    template <class E>                                                                       \
    static auto along(const E& e, int axis, bool) { return et::FUNCTION(e, axis, true); }    \
  };
ET_TEST_REDUCTION(SumFn, "sum(a * b)", sum, true, false, false, -3, 3, a * b)
ET_TEST_REDUCTION(MeanFn, "mean(a - b)", mean, true, true, false, -3, 3, a - b)
ET_TEST_REDUCTION(MaxFn, "max(x)", max, false, true, false, -3, 3, a)
ET_TEST_REDUCTION(MinFn, "min(x)", min, false, true, false, -3, 3, a)
ET_TEST_REDUCTION(ProdFn, "prod(x), with 0, 1 or 2 exact zeros", prod, false, false, true, -1.5, 1.5, a)
ET_TEST_REDUCTION(NormFn, "norm(x)", norm, false, false, false, -3, 3, a)
#undef ET_TEST_REDUCTION

/// softmax, log_softmax, logsumexp along an axis (logsumexp: keepdim or not).
template <int Kind>
struct RowOperation : OpCase {
  static constexpr const char* name = Kind == 0 ? "softmax(x, axis)" : Kind == 1 ? "log_softmax(x, axis)"
                                                                                 : "logsumexp(x, axis)";
  int axis = 0;
  bool keep = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    axis = any_axis(rng, 3);
    Extents shape = any_shape(rng);
    if (Kind == 2) shape[normalized(axis, 3)] = between(rng, 1, 5);  // an empty row's logsumexp is -inf
    s.add(shape, rng);
    keep = Kind == 2 && coin(rng);
    s.note("axis " + std::to_string(axis) + (keep ? ", keepdim" : ""));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if constexpr (Kind == 0) e.output(et::softmax(x, axis));
    else if constexpr (Kind == 1) e.output(et::log_softmax(x, axis));
    else if (keep) e.output(et::logsumexp(x, axis, true));
    else e.output(et::logsumexp(x, axis));
  }
};

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

struct SliceSelect : OpCase {
  static constexpr const char* name = "x.slice(axis, begin, end, step) or x.select(axis, index)";
  int axis = 0;
  bool select = false;
  std::int64_t begin = 0, end = 0, step = 1;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    axis = any_axis(rng, 3);
    select = coin(rng);
    const std::int64_t n = select ? (shape[normalized(axis, 3)] = between(rng, 1, 5)) : shape[normalized(axis, 3)];
    if (select) {
      begin = between(rng, -n, n - 1);
      s.note("select(" + std::to_string(axis) + ", " + std::to_string(begin) + ")");
    } else {
      begin = between(rng, 0, n), end = between(rng, begin, n), step = between(rng, 1, 3);
      if (end < n && coin(rng)) begin -= n, end -= n;  // counted from the end (an end of 0 would mean 0)
      s.note("slice(" + std::to_string(axis) + ", " + std::to_string(begin) + ", " + std::to_string(end) + ", " +
             std::to_string(step) + ")");
    }
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
struct WriteIntoView : OpCase {
  static constexpr const char* name = "h = 2 a; h.slice(axis, begin, end, step) or h.select(axis, i) = sin(c)";
  int axis = 0;
  bool select = false;
  std::int64_t begin = 0, end = 0, step = 1;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    Extents shape = any_shape(rng);
    axis = any_axis(rng, 3);
    const std::size_t a = normalized(axis, 3);
    select = coin(rng);
    Extents part = shape;
    if (select) {
      shape[a] = between(rng, 1, 5);
      begin = between(rng, 0, shape[a] - 1);
      part.erase(part.begin() + static_cast<std::ptrdiff_t>(a));
      s.note("select(" + std::to_string(axis) + ", " + std::to_string(begin) + ")");
    } else {
      begin = between(rng, 0, shape[a]), end = between(rng, begin, shape[a]), step = between(rng, 1, 3);
      part[a] = (end - begin + step - 1) / step;
      s.note("slice(" + std::to_string(axis) + ", " + std::to_string(begin) + ", " + std::to_string(end) + ", " +
             std::to_string(step) + ")");
    }
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

// --- Matrix products -------------------------------------------------------------------------------

/// matmul(a, b) with a and b of rank 2 or 3 (batches broadcast), read through their leaves'
/// layouts (a permuted leaf is a transposed matrix); for rank 3 and 3, also inside an
/// expression.
struct Matmul : OpCase {
  static constexpr const char* name = "matmul(a, b)";
  int ranks = 0;  // a's rank - 2 + 2 (b's rank - 2)
  bool in_expression = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    ranks = static_cast<int>(rng() % 4);
    const std::int64_t m = any_extent(rng), k = any_extent(rng), n = any_extent(rng), batch = between(rng, 1, 3);
    const int broadcast = static_cast<int>(rng() % 3);  // 1: a's batch is 1, 2: b's
    Extents a{m, k}, b{k, n};
    if (ranks & 1) a.insert(a.begin(), broadcast == 1 ? 1 : batch);
    if (ranks & 2) b.insert(b.begin(), broadcast == 2 ? 1 : batch);
    s.add(a, rng, -2, 2);
    s.add(b, rng, -2, 2);
    in_expression = ranks == 3 && coin(rng);
    if (in_expression) s.note("as 0.5 * matmul(a, b) + 1");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    if (ranks == 0) e.output(et::eval(et::matmul(e.template input<2>(0), e.template input<2>(1))));
    if (ranks == 1) e.output(et::eval(et::matmul(e.template input<3>(0), e.template input<2>(1))));
    if (ranks == 2) e.output(et::eval(et::matmul(e.template input<2>(0), e.template input<3>(1))));
    if (ranks != 3) return;
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    if (in_expression) e.output(et::eval(0.5 * et::matmul(a, b) + 1.0));
    else e.output(et::eval(et::matmul(a, b)));
  }
};

/// act(matmul(a, w) + bias), recorded as one linear-layer node.
struct LinearNode : OpCase {
  static constexpr const char* name = "act(matmul(a, w) + bias) (one node)";
  int form = 0;
  static constexpr const char* forms[] = {"matmul(a, w) + bias", "bias + matmul(a, w)", "relu(matmul(a, w) + bias)",
                                          "relu(matmul(a, w))", "gelu_tanh(matmul(a, w) + bias)",
                                          "gelu_tanh(matmul(a, w))"};
  bool has_bias() const { return form != 3 && form != 5; }
  void draw(OpSetup& s, std::mt19937_64& rng) {
    form = static_cast<int>(rng() % 6);
    const std::int64_t m = any_extent(rng), k = any_extent(rng), n = any_extent(rng);
    s.add({m, k}, rng, -2, 2);
    s.add({k, n}, rng, -2, 2);
    if (has_bias()) s.add({n}, rng, -2, 2);
    s.note(forms[form]);
  }
  /// relu: every pre-activation at least 1e-3 from 0.
  bool acceptable(const OpSetup& s) const {
    if (form != 2 && form != 3) return true;
    const auto a = s.inputs[0].logical(), w = s.inputs[1].logical();
    const std::vector<double> bias = has_bias() ? s.inputs[2].logical() : std::vector<double>{};
    const std::int64_t m = s.inputs[0].shape[0], k = s.inputs[0].shape[1], n = s.inputs[1].shape[1];
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double z = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(j)];
        for (std::int64_t l = 0; l < k; ++l) z += a[static_cast<std::size_t>(i * k + l)] * w[static_cast<std::size_t>(l * n + j)];
        if (std::fabs(z) < 1e-3) return false;
      }
    return true;
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<2>(0), w = e.template input<2>(1);
    et::Tensor<double, 2, D> out;  // a new tensor: the one-node path
    if (form == 3) out = et::relu(et::matmul(a, w));
    else if (form == 5) out = et::gelu_tanh(et::matmul(a, w));
    else {
      const auto bias = e.template input<1>(2);
      if (form == 0) out = et::matmul(a, w) + bias;
      else if (form == 1) out = bias + et::matmul(a, w);
      else if (form == 2) out = et::relu(et::matmul(a, w) + bias);
      else out = et::gelu_tanh(et::matmul(a, w) + bias);
    }
    e.output(out);
  }
};

/// nn::Linear's forward on [N, in] or [B, N, in], its weight and bias the inputs.
struct LinearModule : OpCase {
  static constexpr const char* name = "nn::Linear (x W^T + b)";
  bool batched = false, bias = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    batched = coin(rng), bias = coin(rng);
    const std::int64_t in = any_extent(rng), out = any_extent(rng);
    Extents x{any_extent(rng), in};
    if (batched) x.insert(x.begin(), any_extent(rng));
    s.add(x, rng, -2, 2);
    s.add({out, in}, rng, -2, 2);
    if (bias) s.add({out}, rng, -2, 2);
    s.note(std::string(batched ? "[B, N, in]" : "[N, in]") + (bias ? ", bias" : ", no bias"));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::Linear<double, D> layer;
    layer.weight = e.template input<2>(1);
    if (bias) layer.bias = e.template input<1>(2);
    if (batched) e.output(layer(e.template input<3>(0)));
    else e.output(layer(e.template input<2>(0)));
  }
};

// --- Convolution, pooling, normalization, losses ---------------------------------------------

inline Extents in_layout(et::Layout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return layout == et::Layout::nhwc ? Extents{n, h, w, c} : Extents{n, c, h, w};
}
inline std::string pair_words(const char* what, const std::array<std::int64_t, 2>& v) {
  return std::string(what) + " {" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "}";
}

struct Conv : OpCase {
  static constexpr const char* name = "conv2d(x, w[, bias], options)";
  et::Conv2dOptions options;
  bool bias = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    options.groups = between(rng, 1, 2);
    options.layout = coin(rng) ? et::Layout::nhwc : et::Layout::nchw;
    options.allow_tf32 = false;
    const std::int64_t n = rng() % 8 == 0 ? 0 : between(rng, 1, 2);
    const std::int64_t c = options.groups * between(rng, 1, 2), k = options.groups * between(rng, 1, 2);
    std::int64_t h = 0, w = 0, r = 0, q = 0;
    do {
      h = between(rng, 1, 5), w = between(rng, 1, 5), r = between(rng, 1, 3), q = between(rng, 1, 3);
      options.stride = {between(rng, 1, 2), between(rng, 1, 2)};
      options.padding = {between(rng, 0, 1), between(rng, 0, 1)};
      options.dilation = {between(rng, 1, 2), between(rng, 1, 2)};
    } while (h + 2 * options.padding[0] < options.dilation[0] * (r - 1) + 1 ||
             w + 2 * options.padding[1] < options.dilation[1] * (q - 1) + 1);
    bias = coin(rng);
    s.add(in_layout(options.layout, n, c, h, w), rng);
    s.add(options.layout == et::Layout::nhwc ? Extents{k, r, q, c / options.groups} : Extents{k, c / options.groups, r, q},
          rng);
    if (bias) s.add({k}, rng);
    s.note(std::string(et::detail::layout_name(options.layout)) + ", groups " + std::to_string(options.groups) + ", " +
           pair_words("stride", options.stride) + ", " + pair_words("padding", options.padding) + ", " +
           pair_words("dilation", options.dilation) + (bias ? ", bias" : ""));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<4>(0), w = e.template input<4>(1);
    if (bias) e.output(et::conv2d(x, w, e.template input<1>(2), options));
    else e.output(et::conv2d(x, w, options));
  }
};

template <bool Max>
struct Pool : OpCase {
  static constexpr const char* name = Max ? "max_pool2d(x, options)" : "avg_pool2d(x, options)";
  et::Pool2dOptions options;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    options.layout = coin(rng) ? et::Layout::nhwc : et::Layout::nchw;
    options.count_include_pad = coin(rng);
    const std::int64_t n = rng() % 8 == 0 ? 0 : between(rng, 1, 2), c = between(rng, 1, 3);
    std::int64_t h = 0, w = 0;
    do {
      h = between(rng, 1, 5), w = between(rng, 1, 5);
      options.kernel = {between(rng, 1, 3), between(rng, 1, 3)};
      options.stride = {between(rng, 0, 2), between(rng, 0, 2)};
      options.padding = {between(rng, 0, options.kernel[0] / 2), between(rng, 0, options.kernel[1] / 2)};
    } while (h + 2 * options.padding[0] < options.kernel[0] || w + 2 * options.padding[1] < options.kernel[1]);
    s.add(in_layout(options.layout, n, c, h, w), rng);
    s.note(std::string(et::detail::layout_name(options.layout)) + ", " + pair_words("kernel", options.kernel) + ", " +
           pair_words("stride", options.stride) + ", " + pair_words("padding", options.padding) +
           (Max ? "" : options.count_include_pad ? ", padding counted" : ", padding not counted"));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<4>(0);
    if constexpr (Max) e.output(et::max_pool2d(x, options));
    else e.output(et::avg_pool2d(x, options));
  }
};

/// BatchNorm2d in training (batch statistics) or eval (running statistics, inputs without
/// gradient); its weight and bias are inputs.
struct BatchNorm : OpCase {
  static constexpr const char* name = "nn::BatchNorm2d";
  bool training = true;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    training = rng() % 3 != 0;
    const std::int64_t c = between(rng, 1, 3);
    std::int64_t n = 0, h = 0, w = 0;
    do n = any_extent(rng) % 3, h = any_extent(rng), w = any_extent(rng);
    while (training && n * h * w < 2);  // training needs two values per channel
    s.add({n, c, h, w}, rng);
    s.add({c}, rng, 0.5, 2);
    s.add({c}, rng, -1, 1);
    if (!training) {
      s.add({c}, rng, -1, 1, false);
      s.add({c}, rng, 0.5, 2, false);
    }
    s.note(training ? "training" : "eval");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::BatchNorm2d<double, D> norm(e.dev, e.setup.inputs[1].shape[0]);
    norm.weight = e.template input<1>(1);
    norm.bias = e.template input<1>(2);
    if (!training) {
      norm.running_mean = e.template input<1>(3);
      norm.running_var = e.template input<1>(4);
      norm.eval();
    }
    e.output(norm(e.template input<4>(0)));
  }
};

struct Dropout : OpCase {
  static constexpr const char* name = "nn::Dropout(p, seed) (its mask fixed by the seed)";
  double p = 0.5;
  std::uint64_t seed = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    p = 0.25 * static_cast<double>(between(rng, 1, 3));
    seed = rng();
    s.note("p " + std::to_string(p) + ", seed " + std::to_string(seed));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::Dropout drop(p, seed);  // a new module: its first mask
    e.output(drop(e.template input<3>(0)));
  }
};

struct MseLoss : OpCase {
  static constexpr const char* name = "nn::mse_loss(prediction, target)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents shape = some_shape(rng);
    s.add(shape, rng);
    s.add(shape, rng);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::nn::mse_loss(e.template input<3>(0), e.template input<3>(1)));
  }
};

struct CrossEntropy : OpCase {
  static constexpr const char* name = "nn::cross_entropy(logits, labels)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const std::int64_t n = between(rng, 1, 5), classes = between(rng, 1, 5);
    s.add({n, classes}, rng);
    s.add_index({n}, rng, 0, classes - 1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::nn::cross_entropy(e.template input<2>(0), e.template index<1>()));
  }
};

// --- The family ----------------------------------------------------------------------------------

inline std::uint64_t case_seed(std::uint64_t seed, std::int64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(index) + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// One case of Op: draw, differentiate, then the directional differences (every input
/// moved together, then each alone).
template <class Op, class D>
bool run_case(D dev, std::uint64_t base_seed, std::uint64_t seed, std::int64_t index) {
  std::mt19937_64 rng(case_seed(seed, index));
  Op op;
  OpSetup s;
  op.draw(s, rng);
  for (int tries = 0; tries < 100; ++tries) {
    fill_values(s, rng);
    op.adjust(s, rng);
    if (op.acceptable(s)) break;
  }
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << " (alone: ET_RANDOM_SEED=" << base_seed
       << " ET_RANDOM_CASE=" << index << "): " << Op::name;
  if (!s.text.empty()) what << "; " << s.text;
  for (std::size_t k = 0; k < s.inputs.size(); ++k) what << "; input " << k << " " << s.inputs[k].text();
  INFO(what.str());
  try {
    std::vector<double> w;
    OpEval<D> got(dev, s, w, rng, true);
    op.f(got);
    std::vector<std::size_t> moved;  // the differentiable inputs
    std::vector<std::vector<double>> u(s.inputs.size());
    std::uniform_real_distribution<double> direction(-1.0, 1.0);
    for (std::size_t k = 0; k < s.inputs.size(); ++k) {
      if (!s.inputs[k].differentiable) continue;
      moved.push_back(k);
      for (std::size_t j = 0; j < s.inputs[k].values.size(); ++j) u[k].push_back(direction(rng));
      if (got.grads.size() <= k || got.grads[k].size() != u[k].size())
        throw et::Error("test: no gradient of input " + std::to_string(k) + " was read");
    }
    std::vector<std::vector<std::size_t>> groups;
    if (moved.size() > 1) groups.push_back(moved);
    for (const std::size_t k : moved) groups.push_back({k});
    constexpr double h = 1e-6;
    for (const auto& group : groups) {
      double analytic = 0;
      for (const std::size_t k : group) analytic += std::inner_product(u[k].begin(), u[k].end(), got.grads[k].begin(), 0.0);
      double loss[2];
      for (int side = 0; side < 2; ++side) {
        OpSetup moved_setup = s;
        for (const std::size_t k : group)
          for (std::size_t j = 0; j < u[k].size(); ++j) moved_setup.inputs[k].values[j] += (side == 0 ? h : -h) * u[k][j];
        OpEval<D> at(dev, moved_setup, w, rng, false);
        op.f(at);
        loss[side] = at.loss;
      }
      const double numeric = (loss[0] - loss[1]) / (2 * h);
      // 1e-6 relative, plus the rounding of L (a few ulps of sum |op * w| each) over 2h.
      const double allowed = 1e-6 * std::max(1.0, std::fabs(numeric)) + 8 * DBL_EPSILON * got.scale / h;
      if (!(std::fabs(analytic - numeric) <= allowed)) {
        std::string inputs_moved = group.size() > 1 ? "all inputs" : "input " + std::to_string(group[0]) + " alone";
        CAPTURE(inputs_moved, analytic, numeric, allowed);
        CHECK(false);
        return false;
      }
    }
  } catch (const std::exception& e) {
    FAIL_CHECK(e.what());
    return false;
  }
  return true;
}

/// Op names for the summary, and dispatch of case `index` to operation `which`.
template <class... Ops>
struct Family {
  static constexpr std::size_t size = sizeof...(Ops);
  static constexpr const char* names[] = {Ops::name...};
  template <class D>
  static bool run(std::size_t which, D dev, std::uint64_t base_seed, std::uint64_t seed, std::int64_t index) {
    std::size_t k = 0;
    bool passed = true;
    ((k++ == which ? void(passed = run_case<Ops>(dev, base_seed, seed, index)) : void()), ...);
    return passed;
  }
};

using Operations =
    Family<Unary<NegateFn>, Unary<AbsFn>, Unary<SquareFn>, Unary<ReluFn>, Unary<ExpFn>, Unary<LogFn>, Unary<Log1pFn>,
           Unary<SqrtFn>, Unary<RsqrtFn>, Unary<SinFn>, Unary<CosFn>, Unary<TanhFn>, Unary<SigmoidFn>, Unary<GeluFn>,
           Unary<GeluTanhFn>, Unary<PowScalarFn>, Binary<AddFn>, Binary<SubFn>, Binary<MulFn>, Binary<DivFn>,
           Binary<PowFn>, Binary<MaximumFn>, Binary<MinimumFn>, Fused, Clamp, Where, Reduction<SumFn>,
           Reduction<MeanFn>, Reduction<MaxFn>, Reduction<MinFn>, Reduction<ProdFn>, Reduction<NormFn>,
           RowOperation<0>, RowOperation<1>, RowOperation<2>, Permute, SliceSelect, Reshape, Expand, Copies,
           WriteIntoView, Compound, Gather, IndexSelect, Embedding, Flip, ScatterAdd, Cumsum, SortTopk, Cat, Stack,
           Pad, Matmul, LinearNode, LinearModule, Conv, Pool<true>, Pool<false>, BatchNorm, Dropout, MseLoss,
           CrossEntropy>;

}  // namespace op_grad

/// The family: case c checks operation c mod N (every operation above in turn). Prints the
/// count, the seed and the operations that failed.
template <class D>
void run_op_gradient_family(const char* where, D dev) {
  using Ops = op_grad::Operations;
  const std::uint64_t base_seed = random_seed(), seed = base_seed + 9;
  const char* only = std::getenv("ET_RANDOM_CASE");
  const std::int64_t first = only ? std::atoll(only) : 0;
  const std::int64_t cases = only ? 1 : random_case_count();
  std::vector<std::int64_t> failed(Ops::size);
  for (std::int64_t c = first; c < first + cases; ++c) {
    const auto which = static_cast<std::size_t>(c) % Ops::size;
    failed[which] += !Ops::run(which, dev, base_seed, seed, c);
  }
  std::int64_t total = 0;
  std::string notes;
  for (std::size_t k = 0; k < Ops::size; ++k) {
    total += failed[k];
    if (failed[k]) notes += "\n  FAILED " + std::to_string(failed[k]) + " cases of " + Ops::names[k];
  }
  std::printf("random differential, op gradients on %s: %lld cases over %zu operations, %lld failed, seed %llu%s\n",
              where, static_cast<long long>(cases), Ops::size, static_cast<long long>(total),
              static_cast<unsigned long long>(seed), notes.c_str());
  CHECK(total == 0);
}

}  // namespace test
