// Randomized differential tests of autograd (random_cases.hpp has the machinery), shared by
// the CPU and GPU tests: seven functions of two rank-3 inputs (fused chains, where/maximum,
// reductions, views, batched matmul, log_softmax) over random shapes (extents 0 to 5), b
// broadcast along random axes (a matmul operand: its batch), each read through a random
// layout of its leaf (contiguous, permuted, a stepped slice of a larger leaf) made inside
// the function, in the four floating types; L = sum(f(a, b) * w), w fixed and random. The
// double gradients are checked by directional central differences (PyTorch's fast_mode):
// (L(a + hu, b + hv) - L(a - hu, b - hv)) / 2h against <ga, u> + <gb, v> for random u, v,
// then with v = 0, so neither gradient can make up for the other. Float, half and bfloat16
// gradients are compared element by element with the double ones at the same inputs, within
// a few roundings of T on the scale of the sum of |terms| of each element (double passes
// with b unbroadcast, one per additive part of f; matmul's at |a|, |b|). Values lie on a
// grid exact in every type (a: distinct odd, b: even multiples of 1/64), so nothing
// ties; double jitters them.
#pragma once

#include "random_cases.hpp"

#include <cfloat>
#include <numeric>
#include <optional>
#include <type_traits>

namespace test {

/// How a leaf is read: itself, permuted, or every other element along one axis.
struct GradLayout {
  int kind = 0, axis = 0;
  std::array<int, 3> order{0, 1, 2};
  RShape base{};  // the leaf's shape
  const char* name() const { return kind == 0 ? "contiguous" : kind == 1 ? "permuted" : "stepped slice"; }
  std::int64_t offset(const RShape& i) const {  // the leaf element read at logical index i
    RShape b = i;
    if (kind == 1) for (int d = 0; d < 3; ++d) b[order[d]] = i[d];
    if (kind == 2) b[axis] = 2 * i[axis];
    return offset_of(base, b);
  }
  template <class X>
  X view(const X& leaf, const RShape& shape) const {
    return kind == 1 ? leaf.permute(order) : kind == 2 ? leaf.slice(axis, 0, 2 * shape[axis], 2) : leaf;
  }
};

inline GradLayout grad_layout(const RShape& shape, int kind, std::mt19937_64& rng) {
  GradLayout l{kind, static_cast<int>(rng() % 3), {0, 1, 2}, shape};
  if (kind == 1) {
    std::shuffle(l.order.begin(), l.order.end(), rng);
    for (int d = 0; d < 3; ++d) l.base[l.order[d]] = shape[d];
  }
  if (kind == 2) l.base[l.axis] *= 2;
  return l;
}

/// An input: its logical shape, its layout and its leaf's values (row-major).
struct GradOperand { RShape shape; GradLayout layout; std::vector<double> leaf; };

template <class U>
std::vector<U> rounded_to(const std::vector<double>& values) {
  std::vector<U> out;
  for (const double v : values) out.push_back(static_cast<U>(v));
  return out;
}

/// The weight of additive part k of a function in the evaluation of `part` (-1: all).
inline double part_weight(int part, int k) { return part < 0 || part == k ? 1.0 : 0.0; }

struct GradFunction {
  static constexpr double roundings = 2;        // allowed error, in random_tolerance<T>() (see below)
  static constexpr int parts = 1;               // f = the sum of these, each without cancellation inside
  static constexpr bool nonempty = false;       // mean over all elements: no zero extents
  static constexpr bool axis_nonempty = false;  // max or mean along the axis: it has elements
  static constexpr bool batched = false;        // b = [s0 or 1, n, s2], for a @ b^T
};
struct GradChain : GradFunction {
  static constexpr const char* name = "tanh(a) * sigmoid(b) - exp(b / 2) * square(a)";
  static constexpr int parts = 2;
  template <class X>
  static auto f(const X& a, const X& b, int, int p) {
    return et::eval(part_weight(p, 0) * et::tanh(a) * et::sigmoid(b) -
                    part_weight(p, 1) * et::exp(0.5 * b) * et::square(a));
  }
};
struct GradWhere : GradFunction {
  static constexpr const char* name = "where(a > b, maximum(a, 2 b) * b, log(square(a) + 0.5) / sqrt(square(b) + 1))";
  template <class X>
  static auto f(const X& a, const X& b, int, int) {
    return et::eval(et::where(a > b, et::maximum(a, 2.0 * b) * b,
                              et::log(et::square(a) + 0.5) / et::sqrt(et::square(b) + 1.0)));
  }
};
struct GradAlongAxis : GradFunction {
  static constexpr const char* name = "sum(tanh(a) * b, axis) + max(a, axis) * mean(b, axis)";
  static constexpr int parts = 2;
  static constexpr bool axis_nonempty = true;
  template <class X>
  static auto f(const X& a, const X& b, int axis, int p) {
    return et::eval(part_weight(p, 0) * et::sum(et::tanh(a) * b, axis) +
                    part_weight(p, 1) * et::max(a, axis) * et::mean(b, axis));
  }
};
struct GradOverAll : GradFunction {
  static constexpr const char* name = "sum(a * exp(b / 2)) + mean(sigmoid(a) * b)";
  static constexpr int parts = 2;
  static constexpr bool nonempty = true;
  template <class X>
  static auto f(const X& a, const X& b, int, int p) {
    return et::eval(part_weight(p, 0) * et::sum(a * et::exp(0.5 * b)) +
                    part_weight(p, 1) * et::mean(et::sigmoid(a) * b));
  }
};
struct GradViews : GradFunction {
  static constexpr const char* name = "(x sigmoid(y) + square(x)).slice(1, 0, n, 2).permute({2, 0, 1}), "
                                      "x = a^T(0, 2), y = b.expand(a's shape)^T(0, 2)";
  static constexpr int parts = 2;
  template <class X>
  static auto f(const X& a, const X& b, int, int p) {
    const auto x = a.transpose(0, 2);
    const auto y = b.expand(a.shape()).transpose(0, 2);
    const auto z = et::eval(part_weight(p, 0) * x * et::sigmoid(y) + part_weight(p, 1) * et::square(x));
    return z.slice(1, 0, z.size(1), 2).permute({2, 0, 1});
  }
};
struct GradMatmul : GradFunction {
  static constexpr const char* name = "matmul(a, b.transpose(1, 2))";
  static constexpr bool batched = true;  // bilinear: its terms' magnitudes are the gradients at |a|, |b|
  template <class X>
  static auto f(const X& a, const X& b, int, int) {
    return et::eval(et::matmul(a, b.transpose(1, 2)));
  }
};
struct GradLogSoftmax : GradFunction {
  static constexpr const char* name = "log_softmax(a * b, axis)";
  static constexpr int parts = 2;  // a * b - logsumexp(a * b, axis), for the magnitudes (double only)
  // a * b is rounded to T (|a b| <= 9) before the exponentials, which turn its absolute
  // error into a relative error of up to 2 * 9 units of T in softmax's p (4.5 tolerances).
  static constexpr double roundings = 6;
  template <class X>
  static auto f(const X& a, const X& b, int axis, int p) {
    if constexpr (std::is_same_v<typename X::value_type, double>) {
      if (p == 0) return et::eval(a * b);
      if (p == 1) return et::eval(0.0 * a - et::logsumexp(a * b, axis, true));
    }
    return et::log_softmax(a * b, axis);
  }
};

/// The gradients of one evaluation (leaf order), L and (with them) sum(|f| * w).
struct GradPass {
  std::vector<double> ga, gb;
  double loss = 0, scale = 0;
};

/// Evaluates L = sum(f(a, b) * w) in U on D; with `backward`, also the leaves' gradients.
/// w is drawn (rounded to U) on the first call, when f's output size is known.
template <class U, class F, class D>
GradPass grad_pass(D dev, const GradOperand& a, const GradOperand& b, int axis, int part, std::vector<double>& w,
                   std::mt19937_64& rng, bool backward) {
  auto leaf = [&](const GradOperand& x) {
    auto t = et::from_vector(dev, rounded_to<U>(x.leaf), x.layout.base);
    return backward ? t.requires_grad_(true) : t;
  };
  const auto la = leaf(a), lb = leaf(b);
  std::optional<et::NoGradGuard> no_grad;
  if (!backward) no_grad.emplace();
  const auto out = F::f(a.layout.view(la, a.shape), b.layout.view(lb, b.shape), axis, part);
  if (w.size() != static_cast<std::size_t>(out.numel())) {
    std::uniform_real_distribution<double> weight(0.5, 1.5);
    w.resize(static_cast<std::size_t>(out.numel()));
    for (double& x : w) x = static_cast<double>(static_cast<U>(weight(rng)));
  }
  const auto wt = et::from_vector(dev, rounded_to<U>(w), out.shape());
  auto loss = et::sum(out * wt);
  GradPass r;
  r.loss = static_cast<double>(loss.item());
  if (!backward) return r;
  r.scale = [&] { et::NoGradGuard no_grad_here; return static_cast<double>(et::sum(et::abs(out) * wt).item()); }();
  loss.backward();
  auto grad = [](const auto& t, std::vector<double>& g) {
    if (!t.grad().defined() || t.grad().shape() != t.shape())
      throw et::Error("test: a leaf's gradient is undefined or not of its shape after backward()");
    const auto v = t.grad().to_vector();
    g.assign(v.begin(), v.end());
  };
  grad(la, r.ga), grad(lb, r.gb);
  return r;
}

/// One case: shapes, layouts and values drawn, the double gradients checked by directional
/// differences, and (T not double) T's gradients against them.
template <class T, class F, class D>
bool run_gradient_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 4, 5};
  RShape shape{}, b_shape{};
  for (auto& e : shape) e = F::nonempty ? extents[1 + rng() % 6] : extents[rng() % 7];
  const int axis = static_cast<int>(rng() % 3);
  if (F::axis_nonempty && shape[axis] == 0) shape[axis] = extents[1 + rng() % 6];
  const RShape full_b = F::batched ? RShape{shape[0], extents[rng() % 7], shape[2]} : shape;
  for (int d = 0; d < 3; ++d) b_shape[d] = (d == 0 || !F::batched) && rng() % 3 == 0 ? 1 : full_b[d];
  GradOperand a{shape, grad_layout(shape, static_cast<int>(rng() % 3), rng), {}};
  GradOperand b{b_shape, grad_layout(b_shape, static_cast<int>(rng() % 3), rng), {}};
  auto at = [](const GradOperand& x, RShape i) {  // the leaf element x reads at i (b broadcast)
    for (int d = 0; d < 3; ++d) i[d] = x.shape[d] == 1 ? 0 : i[d];
    return static_cast<std::size_t>(x.layout.offset(i));
  };
  // Values k / 64: k odd for a (distinct where a is read), even for b; double jitters them.
  std::vector<int> odd(192);
  for (int k = 0; k < 192; ++k) odd[static_cast<std::size_t>(k)] = 2 * k - 191;
  std::shuffle(odd.begin(), odd.end(), rng);
  a.leaf.resize(static_cast<std::size_t>(count_of(a.layout.base)));
  b.leaf.resize(static_cast<std::size_t>(count_of(b.layout.base)));
  for (double& v : a.leaf) v = (2.0 * static_cast<double>(rng() % 192) - 191) / 64;
  for (double& v : b.leaf) v = (2.0 * static_cast<double>(rng() % 193) - 192) / 64;
  for_each_index(shape, [&](const RShape& i, std::size_t k) { a.leaf[at(a, i)] = odd[k] / 64.0; });
  std::uniform_real_distribution<double> jitter(-1.0 / 256, 1.0 / 256), direction(-1.0, 1.0);
  if (std::is_same_v<T, double>)
    for (auto* x : {&a.leaf, &b.leaf}) for (double& v : *x) v += jitter(rng);
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": " << F::name << " on " << type_name(T{}) << ", a "
       << shape_text(shape) << " " << a.layout.name() << ", b " << shape_text(b_shape) << " " << b.layout.name()
       << ", axis " << axis;
  INFO(what.str());
  try {
    std::vector<double> w;
    const GradPass got = grad_pass<T, F>(dev, a, b, axis, -1, w, rng, true);
    const GradPass ref = std::is_same_v<T, double> ? got : grad_pass<double, F>(dev, a, b, axis, -1, w, rng, true);
    // The double gradients against directional central differences: (u, v), then (u, 0).
    constexpr double h = 1e-6;
    std::vector<double> u(a.leaf.size()), v(b.leaf.size());
    for (auto* x : {&u, &v}) for (double& e : *x) e = direction(rng);
    for (int pair = 0; pair < 2; ++pair) {
      double analytic = std::inner_product(u.begin(), u.end(), ref.ga.begin(), 0.0);
      if (pair == 0) analytic += std::inner_product(v.begin(), v.end(), ref.gb.begin(), 0.0);
      double loss[2];
      for (int s = 0; s < 2; ++s) {
        GradOperand pa = a, pb = b;
        for (std::size_t j = 0; j < u.size(); ++j) pa.leaf[j] += (s == 0 ? h : -h) * u[j];
        for (std::size_t j = 0; j < v.size() && pair == 0; ++j) pb.leaf[j] += (s == 0 ? h : -h) * v[j];
        loss[s] = grad_pass<double, F>(dev, pa, pb, axis, -1, w, rng, false).loss;
      }
      const double numeric = (loss[0] - loss[1]) / (2 * h);
      // 1e-6 relative, plus the rounding of L (a few ulps of sum |f w| each) over 2h.
      const double allowed = 1e-6 * std::max(1.0, std::fabs(numeric)) + 8 * DBL_EPSILON * ref.scale / h;
      if (!(std::fabs(analytic - numeric) <= allowed)) {
        const char* directions = pair == 0 ? "(u, v)" : "(u, 0)";
        CAPTURE(directions, analytic, numeric, allowed);
        CHECK(false);
        return false;
      }
    }
    if constexpr (!std::is_same_v<T, double>) {
      // The magnitudes of each element's terms: the gradients of each part of f, from a and
      // the unbroadcast b (contiguous), summed in absolute value where b is broadcast.
      GradOperand ma{shape, grad_layout(shape, 0, rng), {}}, mb{full_b, grad_layout(full_b, 0, rng), {}};
      for_each_index(shape, [&](const RShape& i, std::size_t) { ma.leaf.push_back(a.leaf[at(a, i)]); });
      for_each_index(full_b, [&](const RShape& i, std::size_t) { mb.leaf.push_back(b.leaf[at(b, i)]); });
      if (F::batched)
        for (auto* x : {&ma.leaf, &mb.leaf}) for (double& e : *x) e = std::fabs(e);
      std::vector<double> mag_a(a.leaf.size()), mag_b(b.leaf.size());
      for (int p = 0; p < F::parts; ++p) {
        const GradPass m = grad_pass<double, F>(dev, ma, mb, axis, F::parts == 1 ? -1 : p, w, rng, true);
        for_each_index(shape, [&](const RShape& i, std::size_t k) { mag_a[at(a, i)] += std::fabs(m.ga[k]); });
        for_each_index(full_b, [&](const RShape& i, std::size_t k) { mag_b[at(b, i)] += std::fabs(m.gb[k]); });
      }
      // Each element within F::roundings tolerances of T on its terms' scale (T's gradients
      // round each term once, a broadcast sum once more: about 2 units of T, half a
      // tolerance), plus one of float (the compute type) on the scale of the largest, at
      // least 1: float cancels in the derivatives themselves (1 - tanh^2).
      auto compare = [&](const char* input, const std::vector<double>& g, const std::vector<double>& want,
                         const std::vector<double>& mag) {
        double largest = 1;
        for (const double m : mag) largest = std::max(largest, m);
        const double floor = random_tolerance<float>() * largest;
        for (std::size_t leaf_element = 0; leaf_element < g.size(); ++leaf_element) {
          const double got_j = g[leaf_element], want_j = want[leaf_element], mag_j = mag[leaf_element];
          const double allowed = F::roundings * random_tolerance<T>() * mag_j + floor;
          if (!(std::fabs(got_j - want_j) <= allowed)) {
            CAPTURE(input, leaf_element, got_j, want_j, mag_j, allowed);
            CHECK(false);
            return false;
          }
        }
        return true;
      };
      if (!compare("a", got.ga, ref.ga, mag_a) || !compare("b", got.gb, ref.gb, mag_b)) return false;
    }
  } catch (const std::exception& e) {
    FAIL_CHECK(e.what());
    return false;
  }
  return true;
}

/// The gradient family: the seven functions above over the four floating types.
template <class D>
void run_gradient_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 6;
  std::mt19937_64 rng(seed);
  run_family("gradients", where, seed, rng, [&](auto tag, std::int64_t c) {
    using T = decltype(tag);
    switch (rng() % 7) {
      case 0: return run_gradient_case<T, GradChain>(dev, rng, seed, c);
      case 1: return run_gradient_case<T, GradWhere>(dev, rng, seed, c);
      case 2: return run_gradient_case<T, GradAlongAxis>(dev, rng, seed, c);
      case 3: return run_gradient_case<T, GradOverAll>(dev, rng, seed, c);
      case 4: return run_gradient_case<T, GradViews>(dev, rng, seed, c);
      case 5: return run_gradient_case<T, GradMatmul>(dev, rng, seed, c);
      default: return run_gradient_case<T, GradLogSoftmax>(dev, rng, seed, c);
    }
  });
}

}  // namespace test
