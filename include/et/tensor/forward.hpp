// Declared low, defined high: the operations that a lower layer calls and a higher layer
// defines, because the higher one is built on the lower. A tensor's view methods record
// their backward (autograd), the executor hands recorded assignments to the derivatives
// and products to the matrix multiply, an operation (ops/) records its node
// (derivatives/). Each is declared here once, naming the file that defines it; a
// translation unit that calls one has included that file (et/core.hpp and et/et.hpp
// include them all). docs/layers.txt has the layers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "et/device.hpp"
#include "et/types.hpp"

namespace et {

template <Element T, int Rank, Device D>
class Tensor;
struct Conv2dOptions;  // backend/nn_shapes.hpp
struct Pool2dOptions;

namespace detail {

template <class A, class B, int Squeeze = -1>
class MatmulExpr;  // ops/matmul_node.hpp: the lazy product a @ b

/// Whether an assignment looks for operands that read other elements of the destination
/// than the one written (checked: then it evaluates into a temporary first), or the user
/// promised that none does (et::noalias(dst) = expr: one kernel straight into dst).
enum class Aliasing : bool { checked, promised_none };

// exec/assign.hpp: evaluates `expr` into `dst` (one kernel or one loop).
template <class T, int Rank, class D, class E>
void assign(Tensor<T, Rank, D>& dst, const E& expr, Aliasing aliasing = Aliasing::checked);

// exec/assign.hpp: assign() without recording anything (what backward code writes with:
// a gradient is never differentiated again).
template <class T, int Rank, class D, class E>
void evaluate(Tensor<T, Rank, D>& dst, const E& expr, Aliasing aliasing = Aliasing::checked);

// exec/lowering.hpp's hook, defined in ops/linalg.hpp: evaluates an expression that holds
// matmul nodes into dst, which assign() has already allocated and checked.
template <class T, int Rank, class D, class E>
void assign_with_matmul(Tensor<T, Rank, D>& dst, const E& expr);

// autograd/graph.hpp: the backward from `root`, seeded with *seed (ones when null).
template <class T, int R, class D>
void run_backward(const Tensor<T, R, D>& root, const Tensor<T, R, D>* seed, bool retain);

// autograd/views.hpp: records how a view (or copy) `out` of `in` passes its gradient back
// (`back(grad_out)` gives in's gradient), when `in` needs a gradient.
template <class Out, class In, class Back>
void record_view(Out& out, const In& in, const Back& back, const char* name);

// autograd/views.hpp: a recorded write into a view.
template <class T, int R, class D, class E>
void assign_into_view(Tensor<T, R, D>& dst, const E& expr);

// autograd/views.hpp: dst (computed by a recorded operation) was overwritten by values that
// need no gradient.
template <class T, int R, class D>
void record_constant_write(Tensor<T, R, D>& dst);

// ops/reduce.hpp: g summed down to `shape` (the axes it was broadcast along).
template <class T, int R, class D, std::size_t N>
Tensor<T, int(N), D> sum_to(const Tensor<T, R, D>& g, const std::array<std::int64_t, N>& shape);

// derivatives/fused.hpp: assign() when the assignment is recorded for autograd.
template <class T, int Rank, class D, class E>
void assign_recorded(Tensor<T, Rank, D>& dst, const E& expr);

// derivatives/reduce.hpp: records out = reduce(expr) for autograd (axis -1: all).
template <template <class> class Op, class T, int RO, class D, class E>
void record_reduction(Tensor<T, RO, D>& out, const E& expr, int axis, const char* name);

// derivatives/linalg.hpp: records dst = a @ b (matmul nodes exist only where ops/linalg.hpp
// is included).
template <class T, int R, class D, class A, class B, int S>
void record_matmul(Tensor<T, R, D>& dst, const MatmulExpr<A, B, S>& product);

// derivatives/linear.hpp: records dst = act(a @ w + bias) as one node when expr has that
// form; false otherwise.
template <class T, int R, class D, class E>
bool record_linear(Tensor<T, R, D>& dst, const E& expr);

// derivatives/nn.hpp: records y = conv2d(x, w[, bias]) for autograd.
template <class T, class D, class TB, int RB, class DB>
void record_conv(Tensor<T, 4, D>& y, const Tensor<T, 4, D>& x, const Tensor<T, 4, D>& w,
                 const Tensor<TB, RB, DB>* bias, const Conv2dOptions& options);

// derivatives/nn.hpp: records y = batch_norm(x, ...[, residual]) for autograd.
struct BatchNormGeometry;
template <class T, class P, class D>
void record_batch_norm(Tensor<T, 4, D>& y, const Tensor<T, 4, D>& x, const Tensor<T, 4, D>& packed,
                       const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias, const Tensor<T, 4, D>* residual,
                       const Tensor<compute_t<T>, 1, D>& save_mean, const Tensor<compute_t<T>, 1, D>& save_invstd,
                       const BatchNormGeometry& geometry);

// derivatives/nn.hpp: records y = layer_norm(x, weight, bias) for autograd.
struct LayerNormGeometry;
template <class T, int R, class D, class P, class C>
void record_layer_norm(Tensor<T, R, D>& y, const Tensor<T, R, D>& x, const Tensor<T, R, D>& packed,
                       const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias, const Tensor<P, 1, D>& w,
                       const Tensor<C, 1, D>& mean, const Tensor<C, 1, D>& rstd, const LayerNormGeometry& geometry);

// derivatives/nn.hpp: records y = max_pool2d(x) (max) or avg_pool2d(x) for autograd.
template <class T, class D>
void record_pool(Tensor<T, 4, D>& y, const Tensor<T, 4, D>& x, const Pool2dOptions& options, bool max);

// derivatives/softmax.hpp: records y = softmax, log_softmax or logsumexp (Kind) of x along
// axis a for autograd.
template <class Kind, int RO, class T, int R, class D>
void record_row_op(Tensor<T, RO, D>& y, const Tensor<T, R, D>& x, int a);

// derivatives/index.hpp: records out = gather(x, a, index) (or index_select, as a gather)
// for autograd.
template <class T, int R, class D>
void record_gather(Tensor<T, R, D>& out, const char* name, const Tensor<T, R, D>& x, int a,
                   const Tensor<std::int64_t, R, D>& index);

// derivatives/index.hpp: records out = scatter_add(x, a, index, src) for autograd.
template <class T, int R, class D>
void record_scatter_add(Tensor<T, R, D>& out, const Tensor<T, R, D>& x, const Tensor<T, R, D>& src, int a,
                        const Tensor<std::int64_t, R, D>& index);

// derivatives/index.hpp: records out = flip(x) along `axes` for autograd.
template <class T, int R, class D>
void record_flip(Tensor<T, R, D>& out, const Tensor<T, R, D>& x, const std::vector<int>& axes);

// derivatives/index.hpp: records the rows' cumulative sums, and the sorted rows (from the
// positions `at`), of `in` ([rows, length]) for autograd.
template <class T, class D>
void record_cumsum(Tensor<T, 2, D>& out, const Tensor<T, 2, D>& in);
template <class T, class D>
void record_sort(Tensor<T, 2, D>& values, const Tensor<T, 2, D>& in, const Tensor<std::int64_t, 2, D>& at);

}  // namespace detail
}  // namespace et
