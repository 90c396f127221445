// Batch normalization over [N, C, H, W] per channel, as PyTorch's F.batch_norm, and with what
// follows it in a residual network in the same pass:
//
//   y = et::batch_norm(x, running_mean, running_var, weight, bias, {.training = true});
//   y = et::batch_norm(x, ..., {.relu = true});                  // relu(batch_norm(x))
//   y = et::batch_norm_add(x, shortcut, ..., {.relu = true});    // relu(batch_norm(x) + shortcut)
//
// In training the batch's mean and biased variance normalize, y = (x - mean) / sqrt(var +
// eps) * weight + bias, and the running statistics move toward the batch's in place:
// running = (1 - momentum) running + momentum batch (the running variance unbiased). In
// eval the running statistics normalize. x: [N, C, H, W]; the other four: [C].
//
// batch_norm_add's residual [N, C', H, W] is added to channels [channel_offset,
// channel_offset + C') of the normalized x: all C of them by default, or fewer for ResNet's
// option-A shortcut, whose zero channels are then never made.
//
// Every floating type, training and eval, is one backend operation forward and one backward
// (backend/cpu/batch_norm.hpp; backend/cuda/batch_norm.hpp: two kernels each way), recorded
// as one autograd node (derivatives/nn.hpp) that gives dx, dweight, dbias and the residual's
// gradient together; statistics accumulate in double, and 16-bit types keep theirs in float.
//
// Mixed precision (autocast, as cuDNN's batch norm of half inputs): x and the residual may be
// half or bfloat16 with the four per-channel tensors float. The running statistics are then
// updated in float, y (of x's type) is rounded once, and the gradients come in the inputs'
// types: dx and the residual's of x's, dweight and dbias float.
#pragma once

#include <string>
#include <type_traits>

#include "et/autograd/graph.hpp"
#include "et/backend/cpu/batch_norm.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/batch_norm.hpp"
#endif

namespace et {

/// F.batch_norm's options: training (batch statistics, running ones updated) or eval
/// (running statistics), the running statistics' momentum and the variance's epsilon; and
/// relu, a ReLU applied to the result in the same pass (after batch_norm_add's residual).
struct BatchNormOptions {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
  bool relu = false;
};

namespace detail {

inline BatchNormGeometry batch_norm_geometry(const Shape<4>& x, const Shape<1>& mean, const Shape<1>& var,
                                             const Shape<1>& weight, const Shape<1>& bias, const BatchNormOptions& o) {
  const std::string where = "et: batch_norm of input " + format_shape(x);
  const std::int64_t c = x[1];
  for (const Shape<1>* s : {&mean, &var, &weight, &bias})
    if ((*s)[0] != c)
      throw ShapeError(where + ": running_mean, running_var, weight and bias must have shape [" + std::to_string(c) +
                       "] (one value per channel), got " + format_shape(mean) + ", " + format_shape(var) + ", " +
                       format_shape(weight) + ", " + format_shape(bias));
  if (!(o.eps > 0)) throw ShapeError(where + ": eps must be positive, got " + std::to_string(o.eps));
  BatchNormGeometry g{x[0], c, x[2] * x[3], o.eps, o.momentum, o.training, o.relu};
  if (o.training && g.count() <= 1)
    throw ShapeError(where + ": in training, batch_norm needs more than one value per channel (N * H * W > 1)");
  return g;
}

/// Places a residual of shape r on channels [offset, offset + r[1]) of g's output.
inline void place_residual(BatchNormGeometry& g, const Shape<4>& x, const Shape<4>& r, std::int64_t offset) {
  if (r[0] != x[0] || r[2] != x[2] || r[3] != x[3] || offset < 0 || r[1] > x[1] - offset)
    throw ShapeError("et: batch_norm_add of input " + format_shape(x) + " and residual " + format_shape(r) +
                     " at channel " + std::to_string(offset) +
                     ": the residual must be [N, C', H, W] as the input, its C' channels inside the input's " +
                     std::to_string(x[1]) + " from the offset on");
  g.residual_first = offset;
  g.residual_channels = r[1];
}

/// t with each plane (the last two axes) packed, as the backends read a residual.
template <class T, class D>
Tensor<T, 4, D> planes_packed(const Tensor<T, 4, D>& t) {
  const bool packed = (t.size(3) <= 1 || t.strides()[3] == 1) && (t.size(2) <= 1 || t.strides()[2] == t.size(3));
  return packed ? t : t.contiguous();
}

/// The element types batch_norm takes: x (and the residual) of T and the per-channel
/// tensors of P, one floating type, or a 16-bit T with float P (mixed precision).
template <class T, class P>
inline constexpr bool batch_norm_types_v =
    is_floating_v<T> && (std::is_same_v<T, P> || (is_16bit_float_v<T> && std::is_same_v<P, float>));

template <class T, class P, class D>
  requires batch_norm_types_v<T, P>
Tensor<T, 4, D> batch_norm_impl(const Tensor<T, 4, D>& x, const Tensor<T, 4, D>* residual, std::int64_t offset,
                                const Tensor<P, 1, D>& running_mean, const Tensor<P, 1, D>& running_var,
                                const Tensor<P, 1, D>& weight, const Tensor<P, 1, D>& bias,
                                const BatchNormOptions& options, const Tensor<std::int64_t, 0, D>* batches_tracked) {
  BatchNormGeometry g = batch_norm_geometry(x.shape(), running_mean.shape(), running_var.shape(), weight.shape(),
                                            bias.shape(), options);
  if (residual) place_residual(g, x.shape(), residual->shape(), offset);
  if (options.training && (!running_mean.is_contiguous() || !running_var.is_contiguous()))
    throw ShapeError("et: batch_norm: running_mean and running_var must be contiguous (training updates them in place)");
  const Tensor<T, 4, D> packed = x.contiguous();
  const Tensor<T, 4, D> residual_planes = residual ? planes_packed(*residual) : Tensor<T, 4, D>{};
  auto y = Tensor<T, 4, D>::allocate(x.shape());
  const bool recorded = records(x, weight, bias) || (residual && records(*residual));
  Tensor<compute_t<T>, 1, D> save_mean, save_invstd;
  if (options.training || recorded) {
    save_mean = Tensor<compute_t<T>, 1, D>::allocate(Shape<1>{g.c});
    save_invstd = Tensor<compute_t<T>, 1, D>::allocate(Shape<1>{g.c});
  }
  batch_norm_forward(backend<D>, g, packed, weight.contiguous(), bias.contiguous(), running_mean.contiguous(),
                     running_var.contiguous(), residual ? &residual_planes : nullptr, y, save_mean, save_invstd,
                     options.training ? batches_tracked : nullptr);
  record_batch_norm(y, x, packed, weight, bias, residual, save_mean, save_invstd, g);
  return y;
}

/// The checks both entry points make at compile time: one device; x and the residual R of
/// T, the per-channel M, V, W, B of one type P, and (T, P) one of batch_norm_types_v's.
template <class T, class D, class R, class M, class V, class W, class B>
constexpr bool batch_norm_operands() {
  [[maybe_unused]] detail::same_devices<D, typename R::device_type, typename M::device_type, typename V::device_type,
                                        typename W::device_type, typename B::device_type> check;
  using P = typename W::value_type;
  static_assert(detail::is_floating_v<T>, "et: batch_norm needs a floating-point element type");
  constexpr bool types = std::is_same_v<T, typename R::value_type> && std::is_same_v<P, typename M::value_type> &&
                         std::is_same_v<P, typename V::value_type> && std::is_same_v<P, typename B::value_type> &&
                         batch_norm_types_v<T, P>;
  static_assert(types || !detail::is_floating_v<T>,
                "et: batch_norm takes x (and the residual), running_mean, running_var, weight and bias of one element "
                "type, or x (and the residual) of half or bfloat16 with the four per-channel tensors float (mixed "
                "precision); convert with et::cast<T>(...)");
  return types && (std::is_same_v<D, typename R::device_type> && std::is_same_v<D, typename M::device_type> &&
                   std::is_same_v<D, typename V::device_type> && std::is_same_v<D, typename W::device_type> &&
                   std::is_same_v<D, typename B::device_type>);
}

}  // namespace detail

/// Batch normalization of x [N, C, H, W] per channel (see the header comment); the other
/// four are [C], of x's device and element type (or all float for a half or bfloat16 x).
/// Throws ShapeError for per-channel tensors of another shape, eps <= 0, and in training one
/// value per channel or fewer, or running statistics that are not contiguous (they are
/// written in place).
template <class T, class D, class TM, class DM, class TV, class DV, class TW, class DW, class TB, class DB>
Tensor<T, 4, D> batch_norm(const Tensor<T, 4, D>& x, const Tensor<TM, 1, DM>& running_mean,
                           const Tensor<TV, 1, DV>& running_var, const Tensor<TW, 1, DW>& weight,
                           const Tensor<TB, 1, DB>& bias, const BatchNormOptions& options = {}) {
  if constexpr (detail::batch_norm_operands<T, D, Tensor<T, 4, D>, Tensor<TM, 1, DM>, Tensor<TV, 1, DV>,
                                            Tensor<TW, 1, DW>, Tensor<TB, 1, DB>>()) {
    return detail::batch_norm_impl(x, static_cast<const Tensor<T, 4, D>*>(nullptr), 0, running_mean, running_var, weight,
                                   bias, options, static_cast<const Tensor<std::int64_t, 0, D>*>(nullptr));
  } else {
    return {};
  }
}

/// batch_norm(x, ...) + residual, then ReLU if options.relu, in one pass: residual [N, C',
/// H, W] is added to channels [channel_offset, channel_offset + C') (all of them when C' =
/// C); it has x's element type. Throws ShapeError, besides batch_norm's cases, for a
/// residual of another N, H or W, or whose channels reach past C.
template <class T, class D, class TR, class DR, class TM, class DM, class TV, class DV, class TW, class DW, class TB,
          class DB>
Tensor<T, 4, D> batch_norm_add(const Tensor<T, 4, D>& x, const Tensor<TR, 4, DR>& residual,
                               const Tensor<TM, 1, DM>& running_mean, const Tensor<TV, 1, DV>& running_var,
                               const Tensor<TW, 1, DW>& weight, const Tensor<TB, 1, DB>& bias,
                               const BatchNormOptions& options = {}, std::int64_t channel_offset = 0) {
  if constexpr (detail::batch_norm_operands<T, D, Tensor<TR, 4, DR>, Tensor<TM, 1, DM>, Tensor<TV, 1, DV>,
                                            Tensor<TW, 1, DW>, Tensor<TB, 1, DB>>()) {
    return detail::batch_norm_impl(x, &residual, channel_offset, running_mean, running_var, weight, bias, options,
                                   static_cast<const Tensor<std::int64_t, 0, D>*>(nullptr));
  } else {
    return {};
  }
}

}  // namespace et
