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
//   ops/softmax.hpp, derivatives/softmax.hpp: softmax, log_softmax, logsumexp (with keepdim
//     or not)
//   views (tensor.hpp, autograd/views.hpp): permute, transpose, slice (steps, negative
//     bounds), select, reshape (view or copy), view, unsqueeze, squeeze, expand (stretched
//     axes and a new one), clone, contiguous, to (a round trip through the host)
//   writes recorded on a computed tensor: an expression assigned into a slice or a select
//     of it (CopySlices), += -= *= /= and h = expr(h) (the overwritten path)
//   ops/index.hpp, derivatives/index.hpp: gather, index_select, embedding, flip, scatter_add
//     (input and source)
//   ops/scan.hpp, derivatives/index.hpp: cumsum, sort's values (ascending, descending),
//     topk's values (largest, smallest)
//   ops/join.hpp: cat (2 or 3 parts, empty ones too), stack, pad
//   matmul (ops/linalg.hpp, derivatives/linalg.hpp): ranks 2 and 3 on either side, broadcast
//     batches, transposed and strided operands, products inside an expression;
//     act(matmul(a, w) + bias) as one node (derivatives/linear.hpp): bias first or last, no
//     bias, relu, gelu_tanh; nn::Linear on [N, in] and [B, N, in]
//   ops/nn.hpp, derivatives/nn.hpp: conv2d (bias or not; stride, padding, dilation,
//     groups; nchw and nhwc), max_pool2d, avg_pool2d (padding counted or not)
//   nn/: BatchNorm2d (training: batch statistics; eval: running ones), Dropout (its mask
//     fixed by its seed), mse_loss (both sides), cross_entropy (derivatives/softmax.hpp)
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
// The machinery is in random_op_grad_setup.hpp, the operations in random_op_grad_{elementwise,
// views,index,nn}.hpp.
#pragma once

#include "random_op_grad_elementwise.hpp"
#include "random_op_grad_index.hpp"
#include "random_op_grad_nn.hpp"
#include "random_op_grad_setup.hpp"
#include "random_op_grad_views.hpp"

namespace test {

namespace op_grad {

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
