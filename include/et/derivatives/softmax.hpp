// Recording softmax, log_softmax, logsumexp and cross_entropy, one node each:
//   softmax        dx = y * (g - sum(g * y, axis))
//   log_softmax    dx = g - exp(y) * sum(g, axis)
//   logsumexp      dx = g * exp(x - y)               (g and y broadcast along the axis)
//   cross_entropy  dx = (softmax(x) - onehot(labels)) * g / N, one fused kernel from the
//                  saved logits and their row logsumexp (the forward's by-product)
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "et/autograd/graph.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/reduce.hpp"
#include "et/ops/softmax.hpp"

namespace et::detail {

/// Records y = Kind(x) along axis a for autograd (this file's header has the gradients).
template <class Kind, int RO, class T, int R, class D>
void record_row_op([[maybe_unused]] Tensor<T, RO, D>& y, [[maybe_unused]] const Tensor<T, R, D>& x,
                   [[maybe_unused]] int a) {
  if constexpr (records_on<D>) {
    if (!records(x)) return;
    y.meta();  // its version counter, shared by the saved handle (which holds no graph)
    const Tensor<T, RO, D> saved = y.detach();
    if constexpr (std::is_same_v<Kind, SoftmaxKind>) {
      auto backward = [a](const auto& g, const auto&, const auto& out) {
        return std::tuple{eval(out * (g - sum(g * out, a, true)))};
      };
      record_op(y, Kind::name, std::tie(x), backward, saved);
    } else if constexpr (std::is_same_v<Kind, LogSoftmaxKind>) {
      auto backward = [a](const auto& g, const auto&, const auto& out) {
        return std::tuple{eval(g - exp(out) * sum(g, a, true))};
      };
      record_op(y, Kind::name, std::tie(x), backward, saved);
    } else {
      auto backward = [a](const auto& g, const auto&, const auto& in, const auto& out) {
        if constexpr (RO == R) return std::tuple{eval(g * exp(in - out))};
        else return std::tuple{eval(g.unsqueeze(a) * exp(in - out.unsqueeze(a)))};
      };
      record_op(y, Kind::name, std::tie(x), backward, x.detach(), saved);
    }
  }
}

/// 0, 1, ..., classes - 1 along the last axis, as an expression (no tensor, no kernel).
template <class D>
auto column_index(std::int64_t classes) {
  using Gen = RangeGenerator<std::int64_t>;
  return GeneratorExpr<Gen, 1, D>(Gen{0, 1}, Shape<1>{classes});
}

/// Records loss = cross_entropy(logits, labels) for autograd, from the row logsumexp
/// `lse` the forward computed.
template <class T, class D>
void record_cross_entropy([[maybe_unused]] Tensor<T, 0, D>& loss, [[maybe_unused]] const Tensor<T, 2, D>& logits,
                          [[maybe_unused]] const Tensor<T, 1, D>& lse,
                          [[maybe_unused]] const Tensor<std::int64_t, 1, D>& labels) {
  if constexpr (records_on<D>) {
    if (!records(logits)) return;
    const std::int64_t n = logits.size(0), classes = logits.size(1);
    auto backward = [n, classes](const auto& g, const auto&, const auto& x, const auto& saved_lse,
                                 const auto& saved_labels) {
      const auto onehot = cast<T>(column_index<D>(classes) == saved_labels.unsqueeze(1));
      Tensor<T, 2, D> dx = (exp(x - saved_lse.unsqueeze(1)) - onehot) * (g / T(n));
      return std::tuple{dx};
    };
    record_op(loss, "cross_entropy", std::tie(logits), backward, logits, lse, labels);
  }
}

}  // namespace et::detail
