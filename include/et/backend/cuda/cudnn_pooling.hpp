// Pooling on a CUDA device through cuDNN's legacy API (cudnnPoolingForward/Backward:
// 4-d descriptors with strides, so nchw and nhwc alike), which needs no algorithm search.
// Handles, errors and the stream binding come from cudnn.hpp, tensor descriptors from
// cudnn_legacy.hpp.
#pragma once

#include "et/backend/cuda/cudnn_legacy.hpp"
#include "et/backend/nn_shapes.hpp"

namespace et::detail::cudnn_backend {

class PoolingDescriptor {
 public:
  PoolingDescriptor(const PoolGeometry& g, bool max) {
    ET_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
    const cudnnPoolingMode_t mode = max                   ? CUDNN_POOLING_MAX
                                    : g.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    // NaN propagates through max pooling, as in PyTorch.
    const cudnnStatus_t status = cudnnSetPooling2dDescriptor(
        desc_, mode, CUDNN_PROPAGATE_NAN, to_int(g.kernel[0], "kernel"), to_int(g.kernel[1], "kernel"),
        to_int(g.padding[0], "padding"), to_int(g.padding[1], "padding"), to_int(g.stride[0], "stride"),
        to_int(g.stride[1], "stride"));
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroyPoolingDescriptor(desc_);
      throw_cudnn_error(status, "cudnnSetPooling2dDescriptor", __FILE__, __LINE__);
    }
  }
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  ~PoolingDescriptor() { (void)cudnnDestroyPoolingDescriptor(desc_); }
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

/// y = max_pool2d(x) or avg_pool2d(x); both packed in g.layout.
inline void pooling_forward(int device, cudnnDataType_t type, const PoolGeometry& g, bool max, const void* x, void* y) {
  const TraceRange range(max ? "max_pool2d" : "avg_pool2d");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const TensorDescriptor x_desc(type, g.n, g.c, g.h, g.w, g.layout), y_desc(type, g.n, g.c, g.p, g.q, g.layout);
  const PoolingDescriptor pooling(g, max);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnPoolingForward(ctx.handle, pooling.get(), one.get(), x_desc.get(), x, zero.get(), y_desc.get(), y));
}

/// dx from dy. Max pooling reads x and y = max_pool2d(x); average pooling reads neither,
/// but cuDNN's call takes them: `y` and `x` may then be any buffers of their shapes.
inline void pooling_backward(int device, cudnnDataType_t type, const PoolGeometry& g, bool max, const void* y,
                             const void* dy, const void* x, void* dx) {
  const TraceRange range(max ? "max_pool2d backward" : "avg_pool2d backward");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const TensorDescriptor x_desc(type, g.n, g.c, g.h, g.w, g.layout), y_desc(type, g.n, g.c, g.p, g.q, g.layout);
  const PoolingDescriptor pooling(g, max);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnPoolingBackward(ctx.handle, pooling.get(), one.get(), y_desc.get(), y, y_desc.get(), dy,
                                      x_desc.get(), x, zero.get(), x_desc.get(), dx));
}

}  // namespace et::detail::cudnn_backend
