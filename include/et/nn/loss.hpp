// Losses (namespace et::nn), each a 0-d tensor on its inputs' device that records for
// autograd:
//
//   auto loss = et::nn::cross_entropy(logits, labels);  // logits [N, C], labels int64 [N]
//   auto loss = et::nn::mse_loss(prediction, target);    // same shapes
//   loss.backward();
//
// cross_entropy is PyTorch's (log-softmax and negative log-likelihood, mean over the
// batch), computed stably: for each row, m = max, lse = m + log(sum(exp(x - m))), and the
// loss is mean(lse - x[label]): logsumexp reads the logits once (one kernel), and the mean
// (a full reduction: one launch up to 4096 float rows, two above) reads lse and one logit
// a row (x[label]). Its backward is ONE fused kernel, (softmax(x) - onehot) * g / N, from
// the saved logits and lse (PyTorch's separate log_softmax and nll_loss backward are two).
// A label outside [0, C) throws et::Error on the CPU; on a GPU it makes the loss NaN
// (checking there would wait for the GPU on every call).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "et/autograd/graph.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/reduce.hpp"
#include "et/ops/softmax.hpp"
#include "et/tensor.hpp"

namespace et::nn {

namespace detail {

/// True for the labels in [0, classes): (label >= 0) == (label < classes) (both fail
/// together for no label when classes >= 0).
template <class D>
auto labels_in_range(const Tensor<std::int64_t, 1, D>& labels, std::int64_t classes) {
  return (labels >= std::int64_t{0}) == (labels < classes);
}

/// Row i's logit at its label, x[i][labels[i]], or NaN where the label lies outside
/// [0, classes) (reached on a GPU only, whose labels are not checked on the host): N reads
/// of the logits, where a masked row sum would read all N x C again. Not et::gather's
/// generator: gather checks its indices on the host first and reads them unguarded.
template <class T>
struct LabelLogit {
  using value_type = T;
  const T* logits;
  const std::int64_t* labels;
  std::int64_t row_stride, column_stride, label_stride, classes;
  ET_HD T operator()(std::int64_t i) const {
    const std::int64_t c = labels[i * label_stride];
    return c >= 0 && c < classes ? logits[i * row_stride + c * column_stride] : static_cast<T>(NAN);
  }
};

/// 0, 1, ..., classes - 1 along the last axis, as an expression (no tensor, no kernel).
template <class D>
auto column_index(std::int64_t classes) {
  using Gen = et::detail::RangeGenerator<std::int64_t>;
  return et::detail::GeneratorExpr<Gen, 1, D>(Gen{0, 1}, Shape<1>{classes});
}

}  // namespace detail

/// mean((prediction - target)^2) over all elements: a 0-d tensor. The shapes must be equal
/// (PyTorch would broadcast and warn). Throws ShapeError for different shapes or no elements.
template <class T, int R, class D, class DT>
Tensor<T, 0, D> mse_loss(const Tensor<T, R, D>& prediction, const Tensor<T, R, DT>& target) {
  static_assert(et::detail::is_floating_v<T>, "et: mse_loss needs floating-point tensors");
  [[maybe_unused]] et::detail::same_devices<D, DT> check;  // et: operands on ... cannot meet
  if constexpr (et::detail::devices_agree_v<D, DT>) {
    if (prediction.shape() != target.shape())
      throw ShapeError("et: mse_loss: the prediction has shape " + format_shape(prediction.shape()) +
                       " but the target has shape " + format_shape(target.shape()));
    const auto difference = prediction - target;
    return mean(difference * difference);
  } else {
    return {};
  }
}

namespace detail {

template <class T, class D>
Tensor<T, 0, D> cross_entropy_on(const Tensor<T, 2, D>& logits, const Tensor<std::int64_t, 1, D>& labels) {
  const std::int64_t n = logits.size(0), classes = logits.size(1);
  if (labels.size(0) != n)
    throw ShapeError("et: cross_entropy: logits of shape " + format_shape(logits.shape()) + " but labels of shape " +
                     format_shape(labels.shape()) + "; labels need one entry per row");
  if (n == 0) throw ShapeError("et: cross_entropy of an empty batch (shape " + format_shape(logits.shape()) + ")");
  if constexpr (!D::is_cuda) {
    if (!all(detail::labels_in_range(labels, classes)).item())
      throw Error("et: cross_entropy: a label is outside [0, " + std::to_string(classes) + ")");
  }
  Tensor<T, 0, D> loss;
  Tensor<T, 1, D> lse;
  {
    NoGradGuard no_grad;  // recorded below as one node
    const Tensor<T, 2, D> x = logits.detach();
    lse = logsumexp(x, 1);  // one kernel, the one read of the logits
    const detail::LabelLogit<T> pick{x.data(), labels.data(), x.strides()[0], x.strides()[1], labels.strides()[0],
                                     classes};
    // The label's logit a row, read inside the mean's kernel(s): two launches in all up to
    // 4096 float rows (the mean's one block), three above.
    loss = mean(lse - et::detail::GeneratorExpr<detail::LabelLogit<T>, 1, D>(pick, Shape<1>{n}));
    et::detail::note_stream_uses(x, labels);
  }
#if !defined(ET_NO_AUTOGRAD)
  if (grad_enabled() && logits.requires_grad()) {
    auto backward = [n, classes](const auto& g, const auto&, const auto& x, const auto& saved_lse,
                                 const auto& saved_labels) {
      const auto onehot = cast<T>(detail::column_index<D>(classes) == saved_labels.unsqueeze(1));
      Tensor<T, 2, D> dx = (exp(x - saved_lse.unsqueeze(1)) - onehot) * (g / T(n));
      return std::tuple{dx};
    };
    et::detail::attach(
        loss, et::detail::make_op_node<Tensor<T, 0, D>>("cross_entropy", std::tie(logits), backward, logits, lse, labels));
  }
#endif
  return loss;
}

}  // namespace detail

/// The mean over the batch of -log(softmax(logits)[label]): logits [N, C] (floating
/// point), labels [N] (int64, in [0, C)). A 0-d tensor; records for autograd (one node
/// whose backward is one fused kernel). Throws ShapeError when N differs or is 0.
template <class T, class D, class DL>
Tensor<T, 0, D> cross_entropy(const Tensor<T, 2, D>& logits, const Tensor<std::int64_t, 1, DL>& labels) {
  static_assert(et::detail::is_floating_v<T>, "et: cross_entropy needs floating-point logits");
  [[maybe_unused]] et::detail::same_devices<D, DL> check;  // et: operands on ... cannot meet
  if constexpr (et::detail::devices_agree_v<D, DL>) return detail::cross_entropy_on(logits, labels);
  else return {};
}

}  // namespace et::nn
