// The CUDA backend where it cannot be: in a file that nvcc does not compile (CUDA tensors
// can be created, copied (.to) and read there, but nothing can run a kernel), and, for
// convolution and pooling, where cuDNN was not found. These overloads stand in for
// backend/cuda/{elementwise,reduce,cublas,nn}.hpp (backend/backend.hpp says how a call
// finds them) and stop compilation with an et: message instead. Empty under nvcc with cuDNN.
//
// et/et.hpp and et/core.hpp include this file first, so that its messages come with the
// shortest include chain (compile-fail tests hold each diagnostic to 10 lines).
#pragma once

#include "et/config.hpp"

#if !defined(ET_DEVICE_COMPILER)

#include "et/backend/backend.hpp"
#include "et/device_mismatch.hpp"

namespace et::detail {

// A class, so that the message appears once per device rather than once per expression.
template <class D>
struct cuda_evaluation_needs_nvcc {
  static_assert(never<D>,
                "et: evaluating an expression on a CUDA device needs nvcc: compile this file as CUDA "
                "(a .cu file, or LANGUAGE CUDA); plain C++ files may create, copy (.to) and read CUDA "
                "tensors but cannot run kernels");
};

namespace cuda_backend {

template <int I, class... Operands>
void run_elementwise(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void reduce_into(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void reduce_axis_into(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void softmax_rows_into(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void cross_entropy_into(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void run_statement(Backend<I>, const Operands&...) {  // et::assign's statements of several outputs
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void matvec_pair(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void layer_norm_forward(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void layer_norm_backward(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void run_gradient(Backend<I>, const Operands&...) {  // autograd's fused backward
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void run_multi_tensor(Backend<I>, const Operands&...) {  // optimizers
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void scatter_add_into(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void cumsum_rows(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
void sort_rows(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
}

template <int I, class... Operands>
bool gemm(Backend<I>, const Operands&...) {
  [[maybe_unused]] cuda_evaluation_needs_nvcc<Cuda<I>> report;
  return false;
}

}  // namespace cuda_backend
}  // namespace et::detail

#endif

// Convolution and pooling need cuDNN besides nvcc; batch normalization needs nvcc only.
#if !defined(ET_DEVICE_COMPILER) || !defined(ET_WITH_CUDNN)

#include "et/backend/backend.hpp"
#include "et/device_mismatch.hpp"

#if !defined(ET_DEVICE_COMPILER)
#define ET_NN_UNAVAILABLE \
  "et: conv2d, pooling, batch_norm and their gradients on a CUDA device need nvcc: compile this file as CUDA (a .cu file, or LANGUAGE CUDA)"
#elif __has_include(<cudnn.h>)  // installed, but this file was compiled without it
#define ET_NN_UNAVAILABLE                                                                                 \
  "et: conv2d and pooling on a CUDA device need cuDNN, which is installed (cudnn.h) but not enabled for " \
  "this file: compile with -DET_WITH_CUDNN=1 and link -lcudnn (CMake's et::et does both)"
#else
#define ET_NN_UNAVAILABLE                                                                                   \
  "et: conv2d and pooling on a CUDA device need cuDNN, which was not found when etensor was configured; " \
  "install cuDNN 9 and configure again"
#endif

namespace et::detail::cuda_backend {

// The assertion sits in each function itself, not in a class (nor in a macro), which keeps
// the diagnostic within 10 lines.
template <int I, class... Operands>
void conv_forward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void conv_backward_data(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void conv_backward_filter(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void pool_forward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void max_pool_backward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void avg_pool_backward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
#if !defined(ET_DEVICE_COMPILER)  // batch normalization runs etensor's kernels: nvcc alone
template <int I, class... Operands>
void batch_norm_forward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
template <int I, class... Operands>
void batch_norm_backward(Backend<I>, const Operands&...) {
  static_assert(never<Cuda<I>>, ET_NN_UNAVAILABLE);
}
#endif

}  // namespace et::detail::cuda_backend

#undef ET_NN_UNAVAILABLE
#endif
