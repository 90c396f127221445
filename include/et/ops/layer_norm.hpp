// Layer normalization over the last axis, as PyTorch's F.layer_norm with normalized_shape
// the last dimension, and the residual form of a transformer block (llm.c's fused residual):
//
//   y = et::layer_norm(x, weight, bias, 1e-5);     // weight and bias [C], x [..., C]
//   y = et::layer_norm(x);                          // no affine transform
//   auto [h, y] = et::add_layer_norm(x, r, weight, bias);   // h = x + r, y = layer_norm(h)
//
// One pass forward (a row's statistics read back from the cache), one pass backward for dx
// and the rows' share of dweight and dbias, whose column sums a second small kernel adds in
// a fixed order (backend/{cpu,cuda}/layer_norm.hpp). x of any floating type; weight and bias
// of x's type, or float for a half or bfloat16 x (mixed precision, as nn::LayerNorm keeps
// them); the statistics in float (double for double). Differentiable in x, weight and bias;
// add_layer_norm records h = x + r and layer_norm(h) as two operations (its fused kernel
// runs where nothing records). Under et::amp::Autocast the input keeps its type (PyTorch
// computes layer_norm in float there).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "et/autograd/graph.hpp"
#include "et/backend/cpu/layer_norm.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/exec/assign.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/layer_norm.hpp"
#endif

namespace et {

/// What add_layer_norm gives: the residual stream h = x + r and y = layer_norm(h).
template <class T, int R, class D>
struct LayerNormResidual {
  Tensor<T, R, D> h;
  Tensor<T, R, D> y;
};

namespace detail {

/// x of T with weight and bias of P: one floating type, or a 16-bit T with float P.
template <class T, class P>
inline constexpr bool layer_norm_types_v =
    is_floating_v<T> && (std::is_same_v<T, P> || (is_16bit_float_v<T> && std::is_same_v<P, float>));

template <class T, int R, class D, class P>
LayerNormGeometry layer_norm_geometry(const Tensor<T, R, D>& x, const Tensor<P, 1, D>& weight,
                                      const Tensor<P, 1, D>& bias, double eps, const char* name) {
  if (!x.defined()) throw Error(std::string("et: ") + name + " on an undefined (default-constructed) tensor");
  const std::int64_t cols = x.size(R - 1);
  const std::string where = std::string("et: ") + name + " of input " + format_shape(x.shape());
  for (const Tensor<P, 1, D>* t : {&weight, &bias})
    if (t->defined() && t->size(0) != cols)
      throw ShapeError(where + ": weight and bias must have shape [" + std::to_string(cols) +
                       "] (the last axis), got " + format_shape(t->shape()));
  if (!(eps >= 0) || !std::isfinite(eps))
    throw ShapeError(where + ": eps must be finite and not negative, got " + std::to_string(eps));
  return {cols == 0 ? 0 : x.numel() / cols, cols, eps};
}

/// The pointer of a defined tensor, else null.
template <class T, int R, class D>
auto* pointer_of(const Tensor<T, R, D>& t) {
  return t.defined() ? t.data() : static_cast<T*>(nullptr);
}

template <class T, int R, class D, class P>
Tensor<T, R, D> layer_norm_impl(const Tensor<T, R, D>& x, const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias,
                                double eps) {
  const LayerNormGeometry g = layer_norm_geometry(x, weight, bias, eps, "layer_norm");
  auto y = Tensor<T, R, D>::allocate(x.shape());
  using C = compute_t<T>;
  const Tensor<T, R, D> packed = x.contiguous();
  const Tensor<P, 1, D> w = weight.defined() ? weight.contiguous() : weight, b = bias.defined() ? bias.contiguous() : bias;
  const bool recorded = records(x, weight, bias);
  Tensor<C, 1, D> mean, rstd;
  if (recorded) mean = Tensor<C, 1, D>::allocate({g.rows}), rstd = Tensor<C, 1, D>::allocate({g.rows});
  if (g.rows > 0)  // an empty batch still records: its parameters get zero gradients, as in PyTorch
    layer_norm_forward(backend<D>, g,
                       LayerNormForward<T, P, C>{packed.data(), nullptr, pointer_of(w), pointer_of(b), nullptr,
                                                 y.data(), pointer_of(mean), pointer_of(rstd)});
  note_stream_uses(packed, w, b, y);
  if (recorded) record_layer_norm(y, x, packed, weight, bias, w, mean, rstd, g);
  return y;
}

}  // namespace detail

/// layer_norm over x's last axis with weight and bias [C] (either may be an undefined
/// tensor: no scale, no shift). Throws ShapeError for a weight or bias of another length and
/// for a negative or non-finite eps; et::Error for an undefined x.
template <class T, int R, class D, class P>
Tensor<T, R, D> layer_norm(const Tensor<T, R, D>& x, const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias,
                           double eps = 1e-5) {
  static_assert(R >= 1, "et: layer_norm normalizes the last axis, which a 0-d tensor lacks");
  static_assert(detail::layer_norm_types_v<T, P>,
                "et: layer_norm takes weight and bias of x's element type, or float ones for a half or bfloat16 x");
  return detail::layer_norm_impl(x, weight, bias, eps);
}

/// layer_norm without the affine transform (PyTorch's elementwise_affine=False).
template <class T, int R, class D>
Tensor<T, R, D> layer_norm(const Tensor<T, R, D>& x, double eps = 1e-5) {
  static_assert(R >= 1, "et: layer_norm normalizes the last axis, which a 0-d tensor lacks");
  static_assert(detail::is_floating_v<T>, "et: layer_norm needs a floating-point element type");
  return detail::layer_norm_impl(x, Tensor<detail::compute_t<T>, 1, D>{}, Tensor<detail::compute_t<T>, 1, D>{}, eps);
}

/// h = x + r and y = layer_norm(h, weight, bias, eps): a transformer block's residual and
/// the next normalization, one pass where nothing records (x, r, h and y each touched once).
/// r has x's shape. Throws as layer_norm, and ShapeError for an r of another shape.
template <class T, int R, class D, class P>
LayerNormResidual<T, R, D> add_layer_norm(const Tensor<T, R, D>& x, const Tensor<T, R, D>& r,
                                          const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias,
                                          double eps = 1e-5) {
  static_assert(R >= 1, "et: add_layer_norm normalizes the last axis, which a 0-d tensor lacks");
  static_assert(detail::layer_norm_types_v<T, P>,
                "et: add_layer_norm takes weight and bias of x's element type, or float ones for a half or "
                "bfloat16 x");
  const detail::LayerNormGeometry g = detail::layer_norm_geometry(x, weight, bias, eps, "add_layer_norm");
  if (!r.defined() || r.shape() != x.shape())
    throw ShapeError("et: add_layer_norm: the residual must have the input's shape " + format_shape(x.shape()) +
                     ", got " + (r.defined() ? format_shape(r.shape()) : std::string("an undefined tensor")));
  if (detail::records(x, r, weight, bias)) {  // two recorded operations, each with its backward
    Tensor<T, R, D> h = x + r;
    return {h, detail::layer_norm_impl(h, weight, bias, eps)};
  }
  auto h = Tensor<T, R, D>::allocate(x.shape()), y = Tensor<T, R, D>::allocate(x.shape());
  if (x.numel() == 0) return {h, y};
  const Tensor<T, R, D> xc = x.contiguous(), rc = r.contiguous();
  const Tensor<P, 1, D> w = weight.defined() ? weight.contiguous() : weight, b = bias.defined() ? bias.contiguous() : bias;
  using C = detail::compute_t<T>;
  layer_norm_forward(detail::backend<D>, g,
                     detail::LayerNormForward<T, P, C>{xc.data(), rc.data(), detail::pointer_of(w), detail::pointer_of(b),
                                                       h.data(), y.data(), nullptr, nullptr});
  detail::note_stream_uses(xc, rc, w, b, h, y);
  return {h, y};
}

}  // namespace et
