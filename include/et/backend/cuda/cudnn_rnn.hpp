// The LSTM on a CUDA device through cuDNN's v8 RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8), as PyTorch runs nn.LSTM: packed
// sequence-major data ([S, B, in] -> [S, B, H], every sequence of full length), states
// [L, B, H], one direction, no projection, no dropout.
//
// Weights travel in PyTorch's order, layer by layer: weight_ih [4H, in], weight_hh [4H, H],
// bias_ih [4H], bias_hh [4H] (gates i, f, g, o, which are cuDNN's linear layers 0-3 for the
// input and 4-7 for the recurrent products). cuDNN keeps them in a weight space of its own
// layout, asked from cudnnGetRNNWeightParams: the forward pass copies them in (one
// device-to-device copy per run of addresses that are consecutive in both), the weight
// gradient comes out the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "et/backend/cuda/cudnn.hpp"
#include "et/backend/cuda/cudnn_legacy.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail::cudnn_backend {

/// What a training forward pass leaves for the backward: cuDNN's weight space (filled)
/// and reserve space, and their sizes.
struct LstmSaved {
  std::shared_ptr<void> weights, reserve;
  std::size_t weight_bytes = 0, reserve_bytes = 0;
};

/// The descriptors of one call (owned; created for each call).
class LstmDescriptors {
 public:
  LstmDescriptors(Context& ctx, cudnnDataType_t type, bool fast_math, const LstmGeometry& g) {
    const int S = to_int(g.seq, "an LSTM's sequence length"), B = to_int(g.batch, "an LSTM's batch");
    const int in = to_int(g.input, "an LSTM's input size"), H = to_int(g.hidden, "an LSTM's hidden size");
    const int L = to_int(g.layers, "an LSTM's layer count");
    to_int(g.seq * g.batch * std::max(g.input, g.hidden), "an LSTM's input or output element count");
    ET_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&dropout_));
    ET_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_, ctx.handle, 0.0f, nullptr, 0, 0));
    ET_CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn_));
    // float: exact float32 products unless the caller's math mode allows TF32 (as matmul);
    // half and bfloat16: tensor cores, float accumulation (as PyTorch's autocast LSTM).
    const bool half_precision = type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
    const cudnnMathType_t math = half_precision                            ? CUDNN_TENSOR_OP_MATH
                                 : type == CUDNN_DATA_FLOAT && !fast_math ? CUDNN_FMA_MATH
                                                                          : CUDNN_DEFAULT_MATH;
    const cudnnDataType_t accumulate = half_precision ? CUDNN_DATA_FLOAT : type;
    ET_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(rnn_, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM,
                                            g.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS, CUDNN_UNIDIRECTIONAL,
                                            CUDNN_LINEAR_INPUT, type, accumulate, math, in, H, H, L, dropout_,
                                            CUDNN_RNN_PADDED_IO_DISABLED));
    const std::vector<int> lengths(static_cast<std::size_t>(B), S);
    ET_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x_));
    ET_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, S, B, in,
                                             lengths.data(), nullptr));
    ET_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y_));
    ET_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, S, B, H,
                                             lengths.data(), nullptr));
    const int dims[3] = {L, B, H}, strides[3] = {B * H, H, 1};
    ET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&state_));
    ET_CUDNN_CHECK(cudnnSetTensorNdDescriptor(state_, type, 3, dims, strides));
    ET_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(ctx.handle, rnn_, &weight_bytes_));
  }
  LstmDescriptors(const LstmDescriptors&) = delete;
  LstmDescriptors& operator=(const LstmDescriptors&) = delete;
  ~LstmDescriptors() {
    (void)cudnnDestroyTensorDescriptor(state_);
    (void)cudnnDestroyRNNDataDescriptor(y_);
    (void)cudnnDestroyRNNDataDescriptor(x_);
    (void)cudnnDestroyRNNDescriptor(rnn_);
    (void)cudnnDestroyDropoutDescriptor(dropout_);
  }
  cudnnRNNDescriptor_t rnn() const { return rnn_; }
  cudnnRNNDataDescriptor_t x() const { return x_; }
  cudnnRNNDataDescriptor_t y() const { return y_; }
  cudnnTensorDescriptor_t state() const { return state_; }
  std::size_t weight_bytes() const { return weight_bytes_; }

 private:
  cudnnDropoutDescriptor_t dropout_ = nullptr;
  cudnnRNNDescriptor_t rnn_ = nullptr;
  cudnnRNNDataDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnTensorDescriptor_t state_ = nullptr;
  std::size_t weight_bytes_ = 0;
};

/// One copy between PyTorch's order (an element offset) and cuDNN's weight space (a byte
/// offset).
struct WeightRun {
  std::int64_t canonical;
  std::size_t space;
  std::int64_t count;
};

/// Where cuDNN keeps each gate's matrix and bias, as runs merged where consecutive in both.
inline std::vector<WeightRun> lstm_weight_runs(Context& ctx, const LstmDescriptors& desc, const LstmGeometry& g,
                                               void* space, std::size_t element_bytes) {
  std::vector<WeightRun> runs;
  auto add = [&](std::int64_t canonical, const void* at, std::int64_t count) {
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(at) - static_cast<const char*>(space));
    if (!runs.empty()) {
      WeightRun& last = runs.back();
      if (last.canonical + last.count == canonical &&
          last.space + static_cast<std::size_t>(last.count) * element_bytes == offset) {
        last.count += count;
        return;
      }
    }
    runs.push_back({canonical, offset, count});
  };
  cudnnTensorDescriptor_t matrix = nullptr, bias = nullptr;
  ET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&matrix));
  const cudnnStatus_t created = cudnnCreateTensorDescriptor(&bias);
  if (created != CUDNN_STATUS_SUCCESS) {
    (void)cudnnDestroyTensorDescriptor(matrix);
    throw_cudnn_error(created, "cudnnCreateTensorDescriptor", __FILE__, __LINE__);
  }
  struct Release {
    cudnnTensorDescriptor_t a, b;
    ~Release() {
      (void)cudnnDestroyTensorDescriptor(a);
      (void)cudnnDestroyTensorDescriptor(b);
    }
  } release{matrix, bias};
  const std::int64_t H = g.hidden;
  std::int64_t base = 0;  // layer l's weight_ih in PyTorch's order
  for (std::int64_t l = 0; l < g.layers; ++l) {
    const std::int64_t in = l == 0 ? g.input : H;
    const std::int64_t w_hh = base + 4 * H * in, b_ih = w_hh + 4 * H * H, b_hh = b_ih + 4 * H;
    for (int id = 0; id < 8; ++id) {
      void* m = nullptr;
      void* b = nullptr;
      ET_CUDNN_CHECK(cudnnGetRNNWeightParams(ctx.handle, desc.rnn(), static_cast<std::int32_t>(l), desc.weight_bytes(),
                                             space, id, matrix, &m, bias, &b));
      const int gate = id % 4;
      if (id < 4) add(base + gate * H * in, m, H * in);
      else add(w_hh + gate * H * H, m, H * H);
      if (g.bias) add((id < 4 ? b_ih : b_hh) + gate * H, b, H);
    }
    base += g.layer_elements(l);
  }
  return runs;
}

/// Copies the runs one way or the other on the handle's stream.
inline void copy_weight_runs(const std::vector<WeightRun>& runs, const void* from, void* to, bool into_space,
                             std::size_t element_bytes, cudaStream_t stream) {
  for (const WeightRun& r : runs) {
    const std::size_t canonical = static_cast<std::size_t>(r.canonical) * element_bytes;
    const char* src = static_cast<const char*>(from) + (into_space ? canonical : r.space);
    char* dst = static_cast<char*>(to) + (into_space ? r.space : canonical);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(r.count) * element_bytes,
                                  cudaMemcpyDeviceToDevice, stream));
  }
}

/// y, hy and cy from x, hx, cx and the weights in PyTorch's order (all packed). Training:
/// returns what the backward needs; else nothing is kept. `lengths`: B int32 values of S on
/// the device (cuDNN reads them asynchronously).
inline LstmSaved lstm_forward(int device, cudnnDataType_t type, bool fast_math, const LstmGeometry& g, bool training,
                              const std::int32_t* lengths, const void* x, const void* hx, const void* cx,
                              const void* weights, void* y, void* hy, void* cy, std::size_t element_bytes) {
  const TraceRange range("lstm");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const LstmDescriptors desc(ctx, type, fast_math, g);
  LstmSaved saved;
  saved.weight_bytes = desc.weight_bytes();
  saved.weights = allocate_bytes(device, saved.weight_bytes);
  copy_weight_runs(lstm_weight_runs(ctx, desc, g, saved.weights.get(), element_bytes), weights, saved.weights.get(),
                   true, element_bytes, ctx.stream);
  const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  std::size_t work_bytes = 0;
  ET_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(ctx.handle, desc.rnn(), mode, desc.x(), &work_bytes, &saved.reserve_bytes));
  const auto work = allocate_bytes(device, work_bytes);
  saved.reserve = allocate_bytes(device, saved.reserve_bytes);
  ET_CUDNN_CHECK(cudnnRNNForward(ctx.handle, desc.rnn(), mode, lengths, desc.x(), x, desc.y(), y, desc.state(), hx, hy,
                                 desc.state(), cx, cy, saved.weight_bytes, saved.weights.get(), work_bytes, work.get(),
                                 saved.reserve_bytes, saved.reserve.get()));
  if (!training) saved = {};
  return saved;
}

/// dx, dhx, dcx and the weights' gradient (PyTorch's order) from dy, dhy, dcy and what the
/// training forward pass read and saved. `saved.reserve` is the forward pass's and is
/// written (cuDNN's backward passes use it as scratch): one backward per forward.
inline void lstm_backward(int device, cudnnDataType_t type, bool fast_math, const LstmGeometry& g,
                          const std::int32_t* lengths, const void* x, const void* hx, const void* cx, const void* y,
                          const void* dy, const void* dhy, const void* dcy, const LstmSaved& saved, void* dx, void* dhx,
                          void* dcx, void* dweights, std::size_t element_bytes) {
  const TraceRange range("lstm backward");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const LstmDescriptors desc(ctx, type, fast_math, g);
  std::size_t work_bytes = 0, reserve_bytes = 0;
  ET_CUDNN_CHECK(
      cudnnGetRNNTempSpaceSizes(ctx.handle, desc.rnn(), CUDNN_FWD_MODE_TRAINING, desc.x(), &work_bytes, &reserve_bytes));
  if (reserve_bytes != saved.reserve_bytes || desc.weight_bytes() != saved.weight_bytes)
    throw Error("et: lstm backward: cuDNN's spaces changed size since the forward pass");
  const auto work = allocate_bytes(device, work_bytes);
  ET_CUDNN_CHECK(cudnnRNNBackwardData_v8(ctx.handle, desc.rnn(), lengths, desc.y(), y, dy, desc.x(), dx, desc.state(), hx,
                                         dhy, dhx, desc.state(), cx, dcy, dcx, saved.weight_bytes, saved.weights.get(),
                                         work_bytes, work.get(), saved.reserve_bytes, saved.reserve.get()));
  // cudnnRNNBackwardWeights_v8 adds into the space (CUDNN_WGRAD_MODE_ADD, its one mode).
  const auto dspace = allocate_bytes(device, saved.weight_bytes);
  ET_CUDA_CHECK(cudaMemsetAsync(dspace.get(), 0, saved.weight_bytes, ctx.stream));
  ET_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(ctx.handle, desc.rnn(), CUDNN_WGRAD_MODE_ADD, lengths, desc.x(), x,
                                            desc.state(), hx, desc.y(), y, saved.weight_bytes, dspace.get(), work_bytes,
                                            work.get(), saved.reserve_bytes, saved.reserve.get()));
  copy_weight_runs(lstm_weight_runs(ctx, desc, g, dspace.get(), element_bytes), dspace.get(), dweights, false,
                   element_bytes, ctx.stream);
}

}  // namespace et::detail::cudnn_backend
