// Batch normalization in training on a CUDA device through cuDNN's legacy calls
// (cudnnBatchNormalizationForwardTraining / Backward, spatial mode: one mean and variance
// per channel over N, H and W), as PyTorch runs nchw float and double tensors. cuDNN
// updates the running statistics in place (momentum as PyTorch's, the running variance
// unbiased) and saves the batch's mean and inverse deviation for the backward pass.
// Descriptors from cudnn_legacy.hpp.
#pragma once

#include "et/backend/cuda/cudnn_legacy.hpp"
#include "et/backend/nn_shapes.hpp"

namespace et::detail::cudnn_backend {

/// The descriptors of one call: x (and y, dx, dy) packed nchw, and the per-channel
/// tensors [1, C, 1, 1] in the type cuDNN derives (float, or double for double).
struct BatchNormDescriptors {
  TensorDescriptor x;
  cudnnTensorDescriptor_t channels = nullptr;

  BatchNormDescriptors(cudnnDataType_t type, const BatchNormGeometry& g) : x(type, g.n, g.c, 1, g.hw, Layout::nchw) {
    ET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&channels));
    const cudnnStatus_t status = cudnnDeriveBNTensorDescriptor(channels, x.get(), CUDNN_BATCHNORM_SPATIAL);
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroyTensorDescriptor(channels);
      throw_cudnn_error(status, "cudnnDeriveBNTensorDescriptor", __FILE__, __LINE__);
    }
  }
  BatchNormDescriptors(const BatchNormDescriptors&) = delete;
  BatchNormDescriptors& operator=(const BatchNormDescriptors&) = delete;
  ~BatchNormDescriptors() { (void)cudnnDestroyTensorDescriptor(channels); }
};

/// The per-channel buffers of a forward pass (each C values of the derived type).
struct BatchNormChannels {
  const void* weight;
  const void* bias;
  void* running_mean;
  void* running_var;
  void* save_mean;
  void* save_invstd;
};

inline void batch_norm_forward(int device, cudnnDataType_t type, const BatchNormGeometry& g, const void* x, void* y,
                               const BatchNormChannels& c) {
  const TraceRange range("batch_norm");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const BatchNormDescriptors desc(type, g);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      ctx.handle, CUDNN_BATCHNORM_SPATIAL, one.get(), zero.get(), desc.x.get(), x, desc.x.get(), y, desc.channels,
      c.weight, c.bias, g.momentum, c.running_mean, c.running_var, g.eps, c.save_mean, c.save_invstd));
}

/// dx, dw and db from dy, the forward input x, the weight and what the forward pass saved.
inline void batch_norm_backward(int device, cudnnDataType_t type, const BatchNormGeometry& g, const void* x,
                                const void* dy, const void* weight, const void* save_mean, const void* save_invstd,
                                void* dx, void* dw, void* db) {
  const TraceRange range("batch_norm backward");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const BatchNormDescriptors desc(type, g);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnBatchNormalizationBackward(ctx.handle, CUDNN_BATCHNORM_SPATIAL, one.get(), zero.get(), one.get(),
                                                 zero.get(), desc.x.get(), x, desc.x.get(), dy, desc.x.get(), dx,
                                                 desc.channels, weight, dw, db, g.eps, save_mean, save_invstd));
}

}  // namespace et::detail::cudnn_backend
