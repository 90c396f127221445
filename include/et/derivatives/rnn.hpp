// The LSTM as one recorded operation on cuDNN (backend/cuda/cudnn_rnn.hpp), where nvcc
// compiles with cuDNN; nn::LSTM (nn/lstm.hpp) calls it for float and double CUDA tensors
// and otherwise composes the LSTM from GEMMs and fused expressions.
//
// The three results (y, h_n, c_n) are views of one tensor, the operation's output, so that
// one node receives all their gradients (a view's gradient adds into its base's). The
// weights arrive in PyTorch's order as one flat tensor (the caller joins them with et::cat,
// whose backward hands each parameter its part).
#pragma once

#include <cstdint>
#include <memory>
#include <tuple>

#include "et/autograd/graph.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/ops/creation.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUDNN)
#include "et/backend/cuda/cudnn_rnn.hpp"
#include "et/backend/math_mode.hpp"
#include "et/runtime/allocator.hpp"
#endif

namespace et::detail {

template <class T, class D>
using LstmOutputs = std::tuple<Tensor<T, 3, D>, Tensor<T, 3, D>, Tensor<T, 3, D>>;

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUDNN)

/// True where lstm_cudnn exists (nvcc with cuDNN).
inline constexpr bool cudnn_lstm_available = true;

/// y, h_n, c_n of the LSTM on cuDNN: x [S, B, in], h0 and c0 [L, B, H], `weights` every
/// layer's parameters flat in PyTorch's order (g.weight_elements() of them).
template <class T, int I>
LstmOutputs<T, Cuda<I>> lstm_cudnn(const Tensor<T, 3, Cuda<I>>& x, const Tensor<T, 3, Cuda<I>>& h0,
                                   const Tensor<T, 3, Cuda<I>>& c0, const Tensor<T, 1, Cuda<I>>& weights,
                                   const LstmGeometry& g) {
  using D = Cuda<I>;
  static_assert(is_floating_v<T>, "et: cuDNN's LSTM runs float, double, half and bfloat16");
  const Tensor<T, 3, D> xp = x.contiguous(), hp = h0.contiguous(), cp = c0.contiguous();
  const Tensor<T, 1, D> wp = weights.contiguous();
  const std::int64_t ny = g.output_elements(), ns = g.state_elements();
  auto out = Tensor<T, 1, D>::allocate(Shape<1>{ny + 2 * ns});
  const auto lengths = full<std::int32_t>(D{}, Shape<1>{g.batch}, static_cast<std::int32_t>(g.seq));
  const bool fast = std::is_same_v<T, float> && math_mode() != MathMode::exact;
  const bool training = records(x, h0, c0, weights);
  note_stream_uses(xp, hp, cp, wp, out, lengths);
  T* y = out.data();
  auto saved = std::make_shared<cudnn_backend::LstmSaved>(cudnn_backend::lstm_forward(
      I, cudnn_backend::data_type<T>(), fast, g, training, lengths.data(), xp.data(), hp.data(), cp.data(), wp.data(),
      y, y + ny, y + ny + ns, sizeof(T)));
  if constexpr (records_on<D>) {
    if (training) {
      auto backward = [g, fast, saved, lengths](const auto& grad, const auto&, const auto& xs, const auto& hs,
                                                const auto& cs, const auto& outs) {
        if (!saved->reserve)
          throw Error("et: backward through cuDNN's LSTM a second time: its first backward used up the forward "
                      "pass's reserve space; run the forward pass again");
        const Tensor<T, 1, D> gp = grad.contiguous();
        auto dx = Tensor<T, 3, D>::allocate(xs.shape());
        auto dh = Tensor<T, 3, D>::allocate(hs.shape()), dc = Tensor<T, 3, D>::allocate(cs.shape());
        auto dw = Tensor<T, 1, D>::allocate(Shape<1>{g.weight_elements()});
        const std::int64_t ny = g.output_elements(), ns = g.state_elements();
        note_stream_uses(gp, dx, dh, dc, dw, xs, hs, cs, outs, lengths);
        cudnn_backend::lstm_backward(I, cudnn_backend::data_type<T>(), fast, g, lengths.data(), xs.data(), hs.data(),
                                     cs.data(), outs.data(), gp.data(), gp.data() + ny, gp.data() + ny + ns, *saved,
                                     dx.data(), dh.data(), dc.data(), dw.data(), sizeof(T));
        saved->reserve.reset();
        saved->weights.reset();
        return std::tuple{dx, dh, dc, dw};
      };
      record_op(out, "lstm", std::tie(x, h0, c0, weights), backward, xp, hp, cp, out);
    }
  }
  const Shape<3> states{g.layers, g.batch, g.hidden};
  return {out.slice(0, 0, ny).view(Shape<3>{g.seq, g.batch, g.hidden}), out.slice(0, ny, ny + ns).view(states),
          out.slice(0, ny + ns, ny + 2 * ns).view(states)};
}

#else

inline constexpr bool cudnn_lstm_available = false;
template <class T, int I>  // never called: nn::LSTM composes the LSTM where this is false
LstmOutputs<T, Cuda<I>> lstm_cudnn(const Tensor<T, 3, Cuda<I>>& x, const Tensor<T, 3, Cuda<I>>& h0,
                                   const Tensor<T, 3, Cuda<I>>& c0, const Tensor<T, 1, Cuda<I>>& weights,
                                   const LstmGeometry& g);

#endif

}  // namespace et::detail
