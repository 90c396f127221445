// Convolution and pooling on the CPU, as ops/nn.hpp calls them through the backend tag
// (backend/backend.hpp): each operation converts its operands to contiguous buffers of the
// compute type (float, or double for double), runs the kernel on them and rounds the result
// into the output tensor. The kernels: oneDNN's for float when etensor is built with it
// (ET_WITH_DNNL, outside CUDA files: backend/cpu/dnnl_conv.hpp, dnnl_pool.hpp), which decline the few
// problems they do not run as conv.hpp and pool.hpp would; those, double, and every
// problem in a build without oneDNN run backend/cpu/conv.hpp and backend/cpu/pool.hpp.
// Cpu tensors only: ops/nn.hpp refuses Pinned ones at compile time.
#pragma once

#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/conv.hpp"
#include "et/backend/cpu/dnnl.hpp"
#include "et/backend/cpu/pool.hpp"
#if defined(ET_DNNL_PRIMITIVES)
#include "et/backend/cpu/dnnl_conv.hpp"
#include "et/backend/cpu/dnnl_pool.hpp"
#endif
#include "et/tensor.hpp"

namespace et::detail {

/// What convolution and pooling compute in: double for double, float for the others.
template <class T>
using nn_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

namespace cpu_backend {

/// A CPU tensor's elements in row-major order as the compute type: the tensor's own
/// buffer when it already is that, else a converted copy.
template <class Acc>
class HostInput {
 public:
  template <class T, int R>
  explicit HostInput(const Tensor<T, R, Cpu>& t) {
    if constexpr (std::is_same_v<T, Acc>) {
      if (t.is_contiguous()) {
        data_ = t.data();
        return;
      }
    }
    const std::vector<T> values = t.to_vector();
    copy_.resize(values.size());
    std::transform(values.begin(), values.end(), copy_.begin(), [](T v) { return static_cast<Acc>(v); });
    data_ = copy_.data();
  }
  const Acc* data() const { return data_; }

 private:
  std::vector<Acc> copy_;
  const Acc* data_ = nullptr;
};

/// A new contiguous CPU tensor written through a compute-type buffer: the tensor itself
/// when T is the compute type, else a buffer rounded into it by finish().
template <class T, class Acc>
class HostOutput {
 public:
  explicit HostOutput(const Tensor<T, 4, Cpu>& t) : tensor_(t) {
    if constexpr (!std::is_same_v<T, Acc>) buffer_.resize(static_cast<std::size_t>(t.numel()));
  }
  Acc* data() {
    if constexpr (std::is_same_v<T, Acc>) return tensor_.data();
    else return buffer_.data();
  }
  void finish() {
    if constexpr (!std::is_same_v<T, Acc>)
      std::transform(buffer_.begin(), buffer_.end(), tensor_.data(), [](Acc v) { return static_cast<T>(v); });
  }

 private:
  Tensor<T, 4, Cpu> tensor_;
  std::vector<Acc> buffer_;
};

/// Runs a CPU kernel on the compute-type buffers of `inputs` and rounds its result into
/// `out`: kernel(inputs' data..., out's data), each pointer an Acc array (HostInput,
/// HostOutput).
template <class T, class Kernel, class... Inputs>
void run_on_host(const Tensor<T, 4, Cpu>& out, Kernel&& kernel, const Inputs&... inputs) {
  using Acc = nn_compute_t<T>;
  HostOutput<T, Acc> result(out);
  kernel(HostInput<Acc>(inputs).data()..., result.data());
  result.finish();
}

// allow_tf32 is for cuDNN; the CPU computes in the compute type throughout.

template <class T>
void conv_forward(Backend, const ConvGeometry& g, bool /*allow_tf32*/, const Tensor<T, 4, Cpu>& x,
                  const Tensor<T, 4, Cpu>& w, const Tensor<T, 1, Cpu>* bias, const Tensor<T, 4, Cpu>& y) {
  std::optional<HostInput<nn_compute_t<T>>> b_in;
  if (bias != nullptr) b_in.emplace(*bias);
  run_on_host(y, [&](auto x_data, auto w_data, auto y_data) {
    const auto b_data = b_in ? b_in->data() : nullptr;
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::conv2d_forward(g, x_data, w_data, b_data, y_data)) return;
#endif
    nn::conv2d_forward(g, x_data, w_data, b_data, y_data);
  }, x, w);
}

template <class T>
void conv_backward_data(Backend, const ConvGeometry& g, bool /*allow_tf32*/, const Tensor<T, 4, Cpu>& dy,
                        const Tensor<T, 4, Cpu>& w, const Tensor<T, 4, Cpu>& dx) {
  run_on_host(dx, [&](auto dy_data, auto w_data, auto dx_data) {
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::conv2d_backward_data(g, dy_data, w_data, dx_data)) return;
#endif
    nn::conv2d_backward_data(g, dy_data, w_data, dx_data);
  }, dy, w);
}

template <class T>
void conv_backward_filter(Backend, const ConvGeometry& g, bool /*allow_tf32*/, const Tensor<T, 4, Cpu>& x,
                          const Tensor<T, 4, Cpu>& dy, const Tensor<T, 4, Cpu>& dw) {
  run_on_host(dw, [&](auto x_data, auto dy_data, auto dw_data) {
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::conv2d_backward_filter(g, x_data, dy_data, dw_data)) return;
#endif
    nn::conv2d_backward_filter(g, x_data, dy_data, dw_data);
  }, x, dy);
}

template <class T>
void pool_forward(Backend, const PoolGeometry& g, bool max, const Tensor<T, 4, Cpu>& x, const Tensor<T, 4, Cpu>& y) {
  run_on_host(y, [&](auto x_data, auto y_data) {
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::pool2d_forward(g, max, x_data, y_data)) return;
#endif
    if (max) nn::max_pool2d_forward(g, x_data, y_data);
    else nn::avg_pool2d_forward(g, x_data, y_data);
  }, x);
}

/// y, the forward output, is for cuDNN: the CPU finds each window's maximum in x again
/// (oneDNN: runs the forward pass again for its workspace).
template <class T>
void max_pool_backward(Backend, const PoolGeometry& g, const Tensor<T, 4, Cpu>& dy, const Tensor<T, 4, Cpu>& x,
                       const Tensor<T, 4, Cpu>& /*y*/, const Tensor<T, 4, Cpu>& dx) {
  run_on_host(dx, [&](auto dy_data, auto x_data, auto dx_data) {
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::pool2d_backward(g, true, dy_data, x_data, dx_data)) return;
#endif
    nn::max_pool2d_backward(g, dy_data, x_data, dx_data);
  }, dy, x);
}

template <class T>
void avg_pool_backward(Backend, const PoolGeometry& g, const Tensor<T, 4, Cpu>& dy, const Tensor<T, 4, Cpu>& dx) {
  run_on_host(dx, [&](auto dy_data, auto dx_data) {
#if defined(ET_DNNL_PRIMITIVES)
    if constexpr (std::is_same_v<nn_compute_t<T>, float>)
      if (dnnl::pool2d_backward(g, false, dy_data, nullptr, dx_data)) return;
#endif
    nn::avg_pool2d_backward(g, dy_data, dx_data);
  }, dy);
}

}  // namespace cpu_backend
}  // namespace et::detail
