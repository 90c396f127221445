// Gradient clipping by the total norm (PyTorch's torch.nn.utils.clip_grad_norm_):
//
//   double norm = et::nn::clip_grad_norm_(model.parameters(), 5.0);   // the norm before clipping
//
// The norm of all the gradients together (as if concatenated) is computed on their device
// without the host waiting for it: one multi-tensor launch per TensorList::capacity
// parameters adds up every gradient's terms and writes the norm (device memory), one more
// scales every gradient by max_norm / (norm + 1e-6) where that is below 1, reading the norm
// there. So a clipped training step can be captured in a CUDA graph (et::capture); only
// reading the result as a double waits for the device, as PyTorch's .item() does.
#pragma once

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "et/ops/creation.hpp"
#include "et/optim/optimizer.hpp"
#include "et/optim/parameter.hpp"

namespace et::nn {

/// What clip_grad_norm_ returns: the total norm before clipping, a 0-d double tensor on
/// the gradients' device. Converting it to double (or printing it) waits for that device.
template <class D>
class TotalNorm {
 public:
  explicit TotalNorm(Tensor<double, 0, D> norm) : norm_(std::move(norm)) {}
  operator double() const { return norm_.item(); }  // NOLINT(google-explicit-constructor): `double n = clip_grad_norm_(...)`
  const Tensor<double, 0, D>& tensor() const noexcept { return norm_; }
  friend std::ostream& operator<<(std::ostream& os, const TotalNorm& n) { return os << double(n); }

 private:
  Tensor<double, 0, D> norm_;
};

namespace detail {

/// g <- g * max_norm / (norm + 1e-6) where that factor is below 1, in g's type (PyTorch
/// multiplies by the factor clamped to 1). A NaN norm makes every gradient NaN, as there.
template <class T>
struct ClipUpdate {
  const double* norm;
  double max_norm;
  ET_HD void operator()(T* const* a, std::int64_t i) const {
    const double factor = max_norm / (*norm + 1e-6);
    if (!(factor >= 1)) a[0][i] = T(et::detail::compute_t<T>(a[0][i]) * et::detail::compute_t<T>(factor));
  }
};

}  // namespace detail

/// Clips the gradients of `params` (those that have one) so that their total `norm_type`
/// norm (any p > 0, or INFINITY for the largest magnitude) is at most about `max_norm`;
/// returns the norm before clipping. See the top of this file for what runs where.
template <class T, class D>
TotalNorm<D> clip_grad_norm_(const std::vector<optim::Parameter<T, D>>& params, double max_norm,
                             double norm_type = 2.0) {
  if (!(max_norm >= 0))
    throw Error("et: clip_grad_norm_: max_norm must be >= 0, got " + std::to_string(max_norm));
  if (!(norm_type > 0))
    throw Error("et: clip_grad_norm_: norm_type must be > 0 (or INFINITY), got " + std::to_string(norm_type));
  const et::detail::NormKind kind{norm_type, std::isinf(norm_type)};
  std::vector<Tensor<T, 1, D>> grads(params.size());
  auto grad_of = [&](std::size_t k, T* (&p)[1]) {
    grads[k] = params[k].grad();
    p[0] = grads[k].defined() ? grads[k].data() : nullptr;
    return grads[k].defined();
  };
  auto norm = Tensor<double, 0, D>::allocate(Shape<0>{});
  bool accumulate = false, any = false;
  optim::detail::for_each_list<1>(params, grad_of, [&](const et::detail::TensorList<T, 1>& list, bool last) {
    if (list.count == 0) return;  // no gradient at all
    run_multi_tensor_norm(et::detail::backend<D>, list, kind, norm.data(), accumulate, last);  // found by ADL
    accumulate = any = true;
  });
  if (!any) return TotalNorm<D>(zeros<double>(D{}, Shape<0>{}));
  optim::detail::apply_all<1>(params, grad_of, detail::ClipUpdate<T>{norm.data(), max_norm});
  return TotalNorm<D>(norm);
}

}  // namespace et::nn
