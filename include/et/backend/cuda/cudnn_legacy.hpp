// cuDNN's legacy descriptor API, which pooling (cudnn_pooling.hpp) calls: 4-d tensor
// descriptors with strides (32-bit extents, checked) and the scaling factors the legacy
// calls take. Errors and handles come from cudnn.hpp.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "et/backend/cuda/cudnn.hpp"
#include "et/backend/nn_shapes.hpp"

namespace et::detail::cudnn_backend {

inline int to_int(std::int64_t value, const char* what) {
  if (value > INT_MAX)
    throw Error(std::string("et: ") + what + " is too large for cuDNN's legacy API (which takes 32-bit extents): " +
                std::to_string(value));
  return static_cast<int>(value);
}

/// A legacy 4-d tensor descriptor: extents N, C, H, W with the layout's packed strides.
class TensorDescriptor {
 public:
  TensorDescriptor(cudnnDataType_t type, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, Layout layout) {
    to_int(n * c * h * w, "a pooling or batch-norm tensor's element count");
    ET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    const bool nhwc = layout == Layout::nhwc;
    const cudnnStatus_t status = cudnnSetTensor4dDescriptorEx(
        desc_, type, int(n), int(c), int(h), int(w), int(c * h * w), nhwc ? 1 : int(h * w), nhwc ? int(w * c) : int(w),
        nhwc ? int(c) : 1);
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroyTensorDescriptor(desc_);
      throw_cudnn_error(status, "cudnnSetTensor4dDescriptorEx", __FILE__, __LINE__);
    }
  }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  ~TensorDescriptor() { (void)cudnnDestroyTensorDescriptor(desc_); }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

/// Legacy scaling factors: double for double data, float otherwise.
struct Scale {
  explicit Scale(cudnnDataType_t type, double value) : as_double(value), as_float(float(value)), is_double(type == CUDNN_DATA_DOUBLE) {}
  const void* get() const { return is_double ? static_cast<const void*>(&as_double) : static_cast<const void*>(&as_float); }
  double as_double;
  float as_float;
  bool is_double;
};

}  // namespace et::detail::cudnn_backend
