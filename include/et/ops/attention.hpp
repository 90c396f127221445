// Scaled dot-product attention, PyTorch's F.scaled_dot_product_attention in its layout and
// semantics:
//
//   auto o = et::scaled_dot_product_attention(q, k, v, {.causal = true});
//   // q [B, H, Tq, Dh], k [B, H, Tk, Dh], v [B, H, Tk, Dv] -> o [B, H, Tq, Dv]
//   // o = softmax(q k^T * scale (+ the causal mask), last axis) v, scale 1/sqrt(Dh) by default
//
// causal: key j is seen by query i where j <= i (PyTorch's is_causal: the top-left
// triangle). dropout_p: each attention weight is dropped with that probability and the
// others scaled by 1 / (1 - p), from the counter-based stream of `seed` (the same seed, the
// same mask: pass a new one each step, as nn::MultiheadAttention does).
//
// This is the composed path: a batched matmul into the [B H, Tq, Tk] scores, the masked
// softmax (one fused kernel), a second batched matmul; each a recorded operation, so its
// backward is theirs. It materializes the scores (T x T per head). attention_path_counts()
// says which path each call took.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "et/exec/assign.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/linalg.hpp"
#include "et/ops/softmax.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"

namespace et {

struct AttentionOptions {
  bool causal = false;
  std::optional<double> scale;  ///< default 1 / sqrt(Dh)
  double dropout_p = 0;
  std::uint64_t seed = 0;  ///< the dropout mask's stream
};

/// How many attention calls took each path, process-wide.
struct AttentionPathCounts {
  std::int64_t fused = 0, composed = 0;
};

namespace detail {

struct AttentionCounters {
  std::atomic<std::int64_t> fused{0}, composed{0};
};
inline AttentionCounters& attention_counters() {
  static AttentionCounters counters;
  return counters;
}

/// Throws ShapeError unless q, k, v are [B, H, Tq, Dh], [B, H, Tk, Dh], [B, H, Tk, Dv], and
/// et::Error for a dropout_p outside [0, 1) or a scale that is not finite.
template <class T, class D>
void check_attention(const Tensor<T, 4, D>& q, const Tensor<T, 4, D>& k, const Tensor<T, 4, D>& v,
                     const AttentionOptions& o) {
  if (!q.defined() || !k.defined() || !v.defined())
    throw Error("et: scaled_dot_product_attention: q, k and v must be defined tensors");
  const auto where = [&] {
    return "q " + format_shape(q.shape()) + ", k " + format_shape(k.shape()) + ", v " + format_shape(v.shape());
  };
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != q.size(1) || v.size(1) != q.size(1))
    throw ShapeError("et: scaled_dot_product_attention: q, k and v must have the same batch and heads [B, H, T, D]; "
                     "got " + where());
  if (k.size(3) != q.size(3))
    throw ShapeError("et: scaled_dot_product_attention: q and k must have the same head dimension (the last axis); got " +
                     where());
  if (v.size(2) != k.size(2))
    throw ShapeError("et: scaled_dot_product_attention: k and v must have the same sequence length (axis 2); got " +
                     where());
  if (!(o.dropout_p >= 0 && o.dropout_p < 1))
    throw Error("et: scaled_dot_product_attention: dropout_p must be in [0, 1), got " + std::to_string(o.dropout_p));
  if (o.scale && !std::isfinite(*o.scale))
    throw Error("et: scaled_dot_product_attention: the scale must be finite");
}

/// The composed path: two batched matmuls around the masked softmax.
template <class T, class D>
Tensor<T, 4, D> composed_attention(const Tensor<T, 4, D>& q, const Tensor<T, 4, D>& k, const Tensor<T, 4, D>& v,
                                   const AttentionOptions& o) {
  ++attention_counters().composed;
  const std::int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dh = q.size(3), tk = k.size(2),
                     dv = v.size(3);
  const double scale = o.scale.value_or(dh > 0 ? 1.0 / std::sqrt(static_cast<double>(dh)) : 1.0);
  const Tensor<T, 3, D> q3 = q.reshape({batch * heads, tq, dh});
  const Tensor<T, 3, D> k3 = k.reshape({batch * heads, tk, dh});
  const Tensor<T, 3, D> v3 = v.reshape({batch * heads, tk, dv});
  const Tensor<T, 3, D> scores = matmul(q3, k3.transpose(1, 2));
  const Tensor<T, 3, D> weights = [&]() -> Tensor<T, 3, D> {
    if (!o.causal) return softmax(scores * T(scale), 2);
    const auto row = arange<std::int64_t>(D{}, tq).reshape({1, tq, 1});
    const auto col = arange<std::int64_t>(D{}, tk).reshape({1, 1, tk});
    return softmax(where(col <= row, scores * T(scale), T(-std::numeric_limits<float>::infinity())), 2);
  }();
  const Tensor<T, 3, D> kept = o.dropout_p == 0 ? weights : dropout(weights, o.dropout_p, o.seed);
  const Tensor<T, 3, D> out = matmul(kept, v3);
  return out.reshape({batch, heads, tq, dv});
}

}  // namespace detail

inline AttentionPathCounts attention_path_counts() {
  const detail::AttentionCounters& c = detail::attention_counters();
  return {c.fused.load(), c.composed.load()};
}

/// softmax(q k^T * scale [+ causal mask]) v over [B, H, T, D] tensors (see above). Throws
/// ShapeError for mismatched batches, heads, head dimensions or sequence lengths.
template <class T, class D>
Tensor<T, 4, D> scaled_dot_product_attention(const Tensor<T, 4, D>& q, const Tensor<T, 4, D>& k,
                                             const Tensor<T, 4, D>& v, const AttentionOptions& options = {}) {
  static_assert(detail::is_floating_v<T>, "et: scaled_dot_product_attention needs a floating-point element type");
  detail::check_attention(q, k, v, options);
  return detail::composed_attention(q, k, v, options);
}

}  // namespace et
