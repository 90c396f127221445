// Losses (namespace et::nn), each a 0-d tensor on its inputs' device that records for
// autograd:
//
//   auto loss = et::nn::cross_entropy(logits, labels);  // logits [N, C], labels int64 [N]
//   auto loss = et::nn::mse_loss(prediction, target);    // same shapes
//   loss.backward();
//
// cross_entropy is PyTorch's (log-softmax and negative log-likelihood, mean over the
// batch), computed stably: for each row, m = max, lse = m + log(sum(exp(x - m))), and the
// loss is mean(lse - x[label]). Its forward is ONE kernel on a GPU, reading the logits once
// (backend/cuda/softmax.hpp: a row's logsumexp, its label's logit and the mean, whose last
// block adds the blocks' sums in a fixed order); its backward is ONE fused kernel,
// (softmax(x) - onehot) * g / N, from the saved logits and lse (PyTorch's forward is two
// kernels or more, and its separate log_softmax and nll_loss backward are two).
// A label outside [0, C) throws et::Error on the CPU; on a GPU it makes the loss NaN
// (checking there would wait for the GPU on every call).
//
// Losses are on autocast's float list (amp/autocast.hpp): of et::half or et::bfloat16
// inputs they compute in float and return a float loss (mse_loss reads the 16-bit values
// in its one fused kernel; cross_entropy reads a float copy of the logits, one cast kernel,
// as PyTorch's autocast makes), so the loss and its scaling never round to 16 bits.
#pragma once

#include <cstdint>
#include <string>

#include "et/derivatives/softmax.hpp"
#include "et/ops/reduce.hpp"
#include "et/ops/softmax.hpp"
#include "et/tensor.hpp"

namespace et::nn {

/// mean((prediction - target)^2) over all elements: a 0-d tensor (float for 16-bit
/// inputs). The shapes must be equal
/// (PyTorch would broadcast and warn). Throws ShapeError for different shapes or no elements.
template <class T, int R, class D, class DT>
Tensor<et::detail::compute_t<T>, 0, D> mse_loss(const Tensor<T, R, D>& prediction, const Tensor<T, R, DT>& target) {
  static_assert(et::detail::is_floating_v<T>, "et: mse_loss needs floating-point tensors");
  [[maybe_unused]] et::detail::same_devices<D, DT> check;  // et: operands on ... cannot meet
  if constexpr (et::detail::devices_agree_v<D, DT>) {
    if (!prediction.defined() || !target.defined())
      throw Error(std::string("et: mse_loss: the ") + (prediction.defined() ? "target" : "prediction") +
                  " is an undefined (default-constructed) tensor");
    if (prediction.shape() != target.shape())
      throw ShapeError("et: mse_loss: the prediction has shape " + format_shape(prediction.shape()) +
                       " but the target has shape " + format_shape(target.shape()));
    if constexpr (et::detail::is_16bit_float_v<T>) {
      const auto difference = cast<float>(prediction) - cast<float>(target);
      return mean(difference * difference);
    } else {
      const auto difference = prediction - target;
      return mean(difference * difference);
    }
  } else {
    return {};
  }
}

namespace detail {

template <class T, class D>
Tensor<T, 0, D> cross_entropy_on(const Tensor<T, 2, D>& logits, const Tensor<std::int64_t, 1, D>& labels) {
  et::detail::require_defined_operand(logits);
  et::detail::require_defined_operand(labels);
  const std::int64_t n = logits.size(0);
  if (labels.size(0) != n)
    throw ShapeError("et: cross_entropy: logits of shape " + format_shape(logits.shape()) + " but labels of shape " +
                     format_shape(labels.shape()) + "; labels need one entry per row");
  if (n == 0) throw ShapeError("et: cross_entropy of an empty batch (shape " + format_shape(logits.shape()) + ")");
  auto loss = Tensor<T, 0, D>::allocate(Shape<0>{});
  auto lse = Tensor<T, 1, D>::allocate(Shape<1>{n});  // saved for the backward
  cross_entropy_into(et::detail::backend<D>, logits, labels, lse, loss, et::detail::rows_geometry(logits, 1, lse));
  et::detail::record_cross_entropy(loss, logits, lse, labels);
  return loss;
}

}  // namespace detail

/// The mean over the batch of -log(softmax(logits)[label]): logits [N, C] (floating
/// point), labels [N] (int64, in [0, C)). A 0-d tensor (float for 16-bit logits); records for autograd (one node
/// whose backward is one fused kernel). Throws ShapeError when N differs or is 0.
template <class T, class D, class DL>
Tensor<et::detail::compute_t<T>, 0, D> cross_entropy(const Tensor<T, 2, D>& logits, const Tensor<std::int64_t, 1, DL>& labels) {
  static_assert(et::detail::is_floating_v<T>, "et: cross_entropy needs floating-point logits");
  [[maybe_unused]] et::detail::same_devices<D, DL> check;  // et: operands on ... cannot meet
  if constexpr (!et::detail::devices_agree_v<D, DL>) {
    return {};
  } else if constexpr (et::detail::is_16bit_float_v<T>) {
    et::detail::require_defined_operand(logits);
    return detail::cross_entropy_on(Tensor<float, 2, D>(cast<float>(logits)), labels);
  } else {
    return detail::cross_entropy_on(logits, labels);
  }
}

}  // namespace et::nn
