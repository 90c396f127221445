// Batch normalization over [N, C, H, W] per channel, as PyTorch's F.batch_norm:
//
//   y = et::batch_norm(x, running_mean, running_var, weight, bias, {.training = true});
//
// In training the batch's mean and biased variance normalize, y = (x - mean) / sqrt(var +
// eps) * weight + bias, and the running statistics move toward the batch's in place:
// running = (1 - momentum) running + momentum batch (the running variance unbiased). In
// eval the running statistics normalize. x: [N, C, H, W]; the other four: [C].
//
// Training on float and double is one backend operation forward and one backward
// (backend/cpu/batch_norm.hpp; on CUDA cuDNN's spatial batch norm, as PyTorch), recorded
// as one autograd node (derivatives/nn.hpp). half and bfloat16 run as fused elementwise
// expressions and per-channel means (their statistics in the type itself), as eval does
// for every type.
#pragma once

#include <string>
#include <type_traits>

#include "et/backend/cpu/batch_norm.hpp"
#include "et/backend/cuda/nn.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/reduce.hpp"
#include "et/tensor.hpp"

namespace et {

/// F.batch_norm's options: training (batch statistics, running ones updated) or eval
/// (running statistics), the running statistics' momentum and the variance's epsilon.
struct BatchNormOptions {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};

namespace detail {

/// The mean over N, H and W of [N, C, H, W], as [1, C, 1, 1]: equal groups, so a mean of means.
template <class T, class D, class E>
Tensor<T, 4, D> channel_mean(const E& e) {
  return mean(mean(mean(e, 3, true), 2, true), 0, true);
}

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
  BatchNormGeometry g{x[0], c, x[2] * x[3], o.eps, o.momentum};
  if (o.training && g.count() <= 1)
    throw ShapeError(where + ": in training, batch_norm needs more than one value per channel (N * H * W > 1)");
  return g;
}

template <class T, class D>
Tensor<T, 4, D> batch_norm_impl(const Tensor<T, 4, D>& x, const Tensor<T, 1, D>& running_mean,
                                const Tensor<T, 1, D>& running_var, const Tensor<T, 1, D>& weight,
                                const Tensor<T, 1, D>& bias, const BatchNormOptions& options) {
  const auto g = batch_norm_geometry(x.shape(), running_mean.shape(), running_var.shape(), weight.shape(), bias.shape(),
                                     options);
  const Shape<4> per_channel{1, g.c, 1, 1};
  const auto w = weight.view(per_channel), b = bias.view(per_channel);
  const T eps = T(options.eps);
  if (!options.training)
    return Tensor<T, 4, D>((x - running_mean.view(per_channel)) * rsqrt(running_var.view(per_channel) + eps) * w + b);
  if (!running_mean.is_contiguous() || !running_var.is_contiguous())
    throw ShapeError("et: batch_norm: running_mean and running_var must be contiguous (training updates them in place)");
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const Tensor<T, 4, D> packed = x.contiguous();
    auto y = Tensor<T, 4, D>::allocate(x.shape());
    auto save_mean = Tensor<T, 1, D>::allocate(Shape<1>{g.c}), save_invstd = Tensor<T, 1, D>::allocate(Shape<1>{g.c});
    batch_norm_forward(backend<D>, g, packed, weight.contiguous(), bias.contiguous(), y, running_mean, running_var,
                       save_mean, save_invstd);
    record_batch_norm(y, x, packed, weight, bias, save_mean, save_invstd, g);
    return y;
  } else {
    const Tensor<T, 4, D> mean = channel_mean<T, D>(x);
    const Tensor<T, 4, D> centered = x - mean;
    const Tensor<T, 4, D> variance = channel_mean<T, D>(centered * centered);
    Tensor<T, 4, D> y = centered * rsqrt(variance + eps) * w + b;
    NoGradGuard no_grad;
    const T m = T(options.momentum), unbiased = T(double(g.count()) / double(g.count() - 1));
    Tensor<T, 1, D> into_mean = running_mean, into_var = running_var;  // the same storage
    into_mean = (T(1) - m) * running_mean + m * mean.detach().view(Shape<1>{g.c});
    into_var = (T(1) - m) * running_var + (m * unbiased) * variance.detach().view(Shape<1>{g.c});
    return y;
  }
}

}  // namespace detail

/// Batch normalization of x [N, C, H, W] per channel (see the header comment); the other
/// four are [C], of x's element type and device. Throws ShapeError for per-channel tensors
/// of another shape, eps <= 0, and in training one value per channel or fewer, or running
/// statistics that are not contiguous (they are written in place).
template <class T, class D, class TM, class DM, class TV, class DV, class TW, class DW, class TB, class DB>
Tensor<T, 4, D> batch_norm(const Tensor<T, 4, D>& x, const Tensor<TM, 1, DM>& running_mean,
                           const Tensor<TV, 1, DV>& running_var, const Tensor<TW, 1, DW>& weight,
                           const Tensor<TB, 1, DB>& bias, const BatchNormOptions& options = {}) {
  [[maybe_unused]] detail::same_devices<D, DM, DV, DW, DB> check;
  constexpr bool one_device = std::is_same_v<D, DM> && std::is_same_v<D, DV> && std::is_same_v<D, DW> && std::is_same_v<D, DB>;
  constexpr bool one_type = std::is_same_v<T, TM> && std::is_same_v<T, TV> && std::is_same_v<T, TW> && std::is_same_v<T, TB>;
  static_assert(detail::is_floating_v<T>, "et: batch_norm needs a floating-point element type");
  static_assert(one_type, "et: batch_norm needs all its tensors of one element type; convert with et::cast<T>(...)");
  if constexpr (one_device && one_type && detail::is_floating_v<T>) {
    return detail::batch_norm_impl(x, running_mean, running_var, weight, bias, options);
  } else {
    return {};
  }
}

}  // namespace et
