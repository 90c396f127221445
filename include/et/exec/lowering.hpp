// Internal (included by exec/assign.hpp): the hook through which an assignment evaluates
// an expression that holds matrix products. A matmul node is not elementwise, so such an
// expression is "lowered" first: each product runs as one GEMM (or one GEMM with a fused
// epilogue), and what is left is an ordinary elementwise expression, evaluated as usual.
// The lowering itself lives in ops/linalg.hpp, which every file that builds a matmul
// node has included.
#pragma once

#include <type_traits>

#include "et/expr/node.hpp"
#include "et/tensor.hpp"

namespace et::detail {

template <class E>
inline constexpr bool is_matmul_v = false;
template <class A, class B, int S>
inline constexpr bool is_matmul_v<MatmulExpr<A, B, S>> = true;

/// True when a matmul's operands need a gradient (autograd: exec/assign.hpp).
template <class A, class B, int S>
bool needs_grad(const MatmulExpr<A, B, S>& e) {
  return needs_grad(e.lhs()) || needs_grad(e.rhs());
}

/// True when an expression tree holds a matmul node anywhere.
template <class E>
inline constexpr bool contains_matmul_v = false;
template <class A, class B, int S>
inline constexpr bool contains_matmul_v<MatmulExpr<A, B, S>> = true;
template <class Op, class... Children>
inline constexpr bool contains_matmul_v<MapExpr<Op, Children...>> = (contains_matmul_v<Children> || ...);

}  // namespace et::detail
