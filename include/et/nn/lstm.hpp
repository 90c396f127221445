// The LSTM (PyTorch's nn.LSTM, sequence-first): its parameters in PyTorch's names, order,
// layouts and gate order (i, f, g, o), so that weights move between the two through
// safetensors, and the same initialization (every tensor uniform in +-1/sqrt(hidden)).
//
//   et::nn::LSTM<float, D> lstm(dev, 256, 256, {.num_layers = 2}, /*seed=*/1);
//   auto [y, h, c] = lstm(x);           // x [seq, batch, input] -> y [seq, batch, hidden],
//   auto [y2, h2, c2] = lstm(x, h, c);  // h, c [num_layers, batch, hidden]: state carried on
//
// On a CUDA device (float, double, half and bfloat16, nvcc with cuDNN) the whole stack is
// one cuDNN operation (derivatives/rnn.hpp), as PyTorch runs it. An LSTM<float, D> takes
// half or bfloat16 inputs (and states) under et::amp::Autocast of their type: it computes in
// that type with its weights' cached 16-bit copies (amp/autocast.hpp), as PyTorch's autocast
// runs the LSTM in the lower precision; float inputs under the guard are cast to its type
// first (and the results back to float), as PyTorch's autocast casts them. Elsewhere each
// layer multiplies the whole sequence by weight_ih in one GEMM (with both biases added), then per step one GEMM
// of the hidden state by weight_hh and two fused elementwise expressions, the cell state's
// and the hidden state's, which read the gates straight from the two products; the backward
// is autograd's: the GEMMs' and the expressions' own fused backwards. Truncated
// back-propagation through time detaches the carried state between calls (h.detach(),
// c.detach()), as with PyTorch.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "et/derivatives/rnn.hpp"
#include "et/nn/layers.hpp"
#include "et/nn/module.hpp"
#include "et/ops/join.hpp"
#include "et/ops/linalg.hpp"

namespace et::nn {

struct LSTMOptions {
  std::int64_t num_layers = 1;
  bool bias = true;  ///< bias_ih and bias_hh (PyTorch's bias=True)
};

/// One layer's parameters, named as PyTorch names them in the LSTM ("weight_ih_l0", ...):
/// weight_ih [4H, in], weight_hh [4H, H], bias_ih [4H], bias_hh [4H], gates i, f, g, o.
template <class T, class D>
class LSTMLayer : public Module<LSTMLayer<T, D>> {
 public:
  Tensor<T, 2, D> weight_ih;
  Tensor<T, 2, D> weight_hh;
  Tensor<T, 1, D> bias_ih;
  Tensor<T, 1, D> bias_hh;
  std::string suffix;  ///< "_l0", "_l1", ...: the layer's part of its parameters' names

  LSTMLayer() = default;
  LSTMLayer(std::int64_t layer, std::int64_t input_size, std::int64_t hidden_size, bool with_bias, std::uint64_t seed)
      : suffix("_l" + std::to_string(layer)) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
    const std::int64_t gates = detail::size_product("LSTM", "4 * hidden_size", {4, hidden_size});
    weight_ih = detail::uniform_parameter<T, 2, D>(Shape<2>{gates, input_size}, bound,
                                                   detail::derive_seed(seed, 0));
    weight_hh = detail::uniform_parameter<T, 2, D>(Shape<2>{gates, hidden_size}, bound,
                                                   detail::derive_seed(seed, 1));
    if (with_bias) {
      bias_ih = detail::uniform_parameter<T, 1, D>(Shape<1>{gates}, bound, detail::derive_seed(seed, 2));
      bias_hh = detail::uniform_parameter<T, 1, D>(Shape<1>{gates}, bound, detail::derive_seed(seed, 3));
    }
  }

  auto members() {
    return std::tuple{Member<Tensor<T, 2, D>>{"weight_ih" + suffix, weight_ih},
                      Member<Tensor<T, 2, D>>{"weight_hh" + suffix, weight_hh},
                      Member<Tensor<T, 1, D>>{"bias_ih" + suffix, bias_ih},
                      Member<Tensor<T, 1, D>>{"bias_hh" + suffix, bias_hh}, Member<std::string>{"suffix", suffix}};
  }
};

/// What the LSTM returns: the last layer's hidden state at every step, then every layer's
/// hidden and cell state after the last step.
template <class T, class D>
using LSTMResult = std::tuple<Tensor<T, 3, D>, Tensor<T, 3, D>, Tensor<T, 3, D>>;

/// The LSTM's computation on explicit parameters (what the module calls): x [S, B, in],
/// h0 and c0 [layers, B, H], one LSTMLayer per layer.
template <class T, class D>
LSTMResult<T, D> lstm(const Tensor<T, 3, D>& x, const Tensor<T, 3, D>& h0, const Tensor<T, 3, D>& c0,
                      const std::vector<LSTMLayer<T, D>>& layers) {
  static_assert(et::detail::is_floating_v<T>, "et: LSTM computes in a floating-point type");
  if (layers.empty()) throw Error("et: LSTM: no layers (construct it with its sizes)");
  const std::int64_t H = layers.front().weight_hh.size(1), S = x.size(0), B = x.size(1);
  const auto L = static_cast<std::int64_t>(layers.size());
  const std::int64_t G = detail::size_product("LSTM", "4 * hidden_size", {4, H});  // the gates' rows
  const std::string name = "et: LSTM(input_size=" + std::to_string(layers.front().weight_ih.size(1)) +
                           ", hidden_size=" + std::to_string(H) + ", num_layers=" + std::to_string(L) + ")";
  if (x.size(2) != layers.front().weight_ih.size(1))
    throw ShapeError(name + ": the input has shape " + format_shape(x.shape()) +
                     " ([seq, batch, input]); its last axis must be " + std::to_string(layers.front().weight_ih.size(1)));
  if (S == 0) throw ShapeError(name + ": the input has shape " + format_shape(x.shape()) + ", a sequence of no steps");
  const Shape<3> state{L, B, H};
  if (h0.shape() != state || c0.shape() != state)
    throw ShapeError(name + ": the states h0 and c0 have shapes " + format_shape(h0.shape()) + " and " +
                     format_shape(c0.shape()) + "; both must be " + format_shape(state) + " ([layers, batch, hidden])");
  const bool bias = layers.front().bias_ih.defined();
  for (std::int64_t l = 0; l < L; ++l) {
    const LSTMLayer<T, D>& layer = layers[static_cast<std::size_t>(l)];
    const std::int64_t in = l == 0 ? x.size(2) : H;
    const std::string which = name + ": layer " + std::to_string(l) + "'s ";
    if (!layer.weight_ih.defined() || !layer.weight_hh.defined()) throw Error(which + "weights are undefined");
    if (layer.weight_ih.shape() != Shape<2>{G, in} || layer.weight_hh.shape() != Shape<2>{G, H})
      throw ShapeError(which + "weight_ih and weight_hh have shapes " + format_shape(layer.weight_ih.shape()) + " and " +
                       format_shape(layer.weight_hh.shape()) + "; they must be " + format_shape(Shape<2>{G, in}) +
                       " and " + format_shape(Shape<2>{G, H}));
    if (layer.bias_ih.defined() != bias || layer.bias_hh.defined() != bias)
      throw Error(which + "biases: every layer has both bias_ih and bias_hh, or none has either");
    if (bias && (layer.bias_ih.shape() != Shape<1>{G} || layer.bias_hh.shape() != Shape<1>{G}))
      throw ShapeError(which + "bias_ih and bias_hh have shapes " + format_shape(layer.bias_ih.shape()) + " and " +
                       format_shape(layer.bias_hh.shape()) + "; both must be " + format_shape(Shape<1>{G}));
  }
  if constexpr (D::is_cuda && et::detail::cudnn_lstm_available) {
    if (B > 0) {  // cuDNN: one operation; its weights flat in PyTorch's order
      std::vector<Tensor<T, 1, D>> flat;
      for (const LSTMLayer<T, D>& layer : layers) {
        flat.push_back(layer.weight_ih.reshape(Shape<1>{layer.weight_ih.numel()}));
        flat.push_back(layer.weight_hh.reshape(Shape<1>{layer.weight_hh.numel()}));
        if (bias) flat.insert(flat.end(), {layer.bias_ih, layer.bias_hh});
      }
      const et::detail::LstmGeometry g{S, B, x.size(2), H, L, bias};
      return et::detail::lstm_cudnn(x, h0, c0, cat(flat, 0), g);
    }
  }
  std::vector<Tensor<T, 2, D>> last_h, last_c;
  Tensor<T, 3, D> input = x;
  for (std::int64_t l = 0; l < L; ++l) {
    const LSTMLayer<T, D>& layer = layers[static_cast<std::size_t>(l)];
    // The whole sequence's input products at once, both biases added: [S, B, 4H].
    Tensor<T, 3, D> projected;
    if (layer.bias_ih.defined()) {
      const Tensor<T, 1, D> bias = layer.bias_ih + layer.bias_hh;
      projected = Tensor<T, 3, D>(matmul(input, layer.weight_ih.transpose(0, 1)) + bias);  // the GEMM adds it
    } else {
      projected = Tensor<T, 3, D>(matmul(input, layer.weight_ih.transpose(0, 1)));
    }
    Tensor<T, 2, D> h = h0.select(0, l), c = c0.select(0, l);
    std::vector<Tensor<T, 2, D>> outputs;
    outputs.reserve(static_cast<std::size_t>(S));
    for (std::int64_t t = 0; t < S; ++t) {
      const Tensor<T, 2, D> recurrent = matmul(h, layer.weight_hh.transpose(0, 1));
      const Tensor<T, 2, D> p = projected.select(0, t);
      auto gate = [&](std::int64_t k) { return p.slice(1, k * H, (k + 1) * H) + recurrent.slice(1, k * H, (k + 1) * H); };
      // New tensors each step (a Tensor assigned a Tensor rebinds; assigned an expression, it
      // would write into h0 and c0's storage).
      c = Tensor<T, 2, D>(sigmoid(gate(1)) * c + sigmoid(gate(0)) * tanh(gate(2)));
      h = Tensor<T, 2, D>(sigmoid(gate(3)) * tanh(c));
      outputs.push_back(h);
    }
    input = stack(outputs, 0);
    last_h.push_back(h);
    last_c.push_back(c);
  }
  return {input, stack(last_h, 0), stack(last_c, 0)};
}

/// A stack of LSTM layers (PyTorch's nn.LSTM with batch_first=False, no dropout between
/// layers, one direction). Its parameters() come layer by layer, each as weight_ih, weight_hh,
/// bias_ih, bias_hh: PyTorch's order.
template <class T, class D>
class LSTM : public Module<LSTM<T, D>> {
 public:
  LSTM() = default;
  LSTM(D, std::int64_t input_size, std::int64_t hidden_size, const LSTMOptions& options = {}, std::uint64_t seed = 0) {
    detail::require_positive("LSTM", "input_size", input_size);
    detail::require_positive("LSTM", "hidden_size", hidden_size);
    detail::require_positive("LSTM", "num_layers", options.num_layers);
    for (std::int64_t l = 0; l < options.num_layers; ++l)
      layers_.emplace_back(l, l == 0 ? input_size : hidden_size, hidden_size, options.bias, detail::derive_seed(seed, l));
  }

  /// The layers, unnamed: their parameters keep PyTorch's flat names ("weight_ih_l0").
  std::vector<Member<LSTMLayer<T, D>>> members() {
    std::vector<Member<LSTMLayer<T, D>>> list;
    for (auto& layer : layers_) list.push_back({"", layer});
    return list;
  }
  // The list interface Module::to copies through.
  void resize(std::size_t n) { layers_.resize(n); }
  std::size_t size() const noexcept { return layers_.size(); }
  LSTMLayer<T, D>& operator[](std::size_t l) { return layers_[l]; }
  const LSTMLayer<T, D>& operator[](std::size_t l) const { return layers_[l]; }

  std::int64_t num_layers() const noexcept { return static_cast<std::int64_t>(layers_.size()); }
  std::int64_t hidden_size() const { return layers_.empty() ? 0 : layers_.front().weight_hh.size(1); }

  /// From zero states. x of T, or of half / bfloat16 when T is float (mixed precision).
  template <class TX, class DX>
  LSTMResult<TX, D> forward(const Tensor<TX, 3, DX>& x) {
    [[maybe_unused]] et::detail::same_devices<D, DX> check;  // et: operands on ... cannot meet
    if constexpr (std::is_same_v<D, DX>) {
      const auto zero = zeros<TX>(D{}, Shape<3>{num_layers(), x.size(1), hidden_size()});
      return forward(x, zero, zero);
    } else {
      return {};
    }
  }
  template <class TX, class DX, class DH, class DC>
  LSTMResult<TX, D> forward(const Tensor<TX, 3, DX>& x, const Tensor<TX, 3, DH>& h0, const Tensor<TX, 3, DC>& c0) {
    [[maybe_unused]] et::detail::same_devices<D, DX, DH, DC> check;  // et: operands on ... cannot meet
    static_assert(detail::takes_activation_v<T, TX>,
                  "et: LSTM<T, D> takes tensors of its element type T, or et::bfloat16 / et::half ones when T is "
                  "float (mixed precision, et::amp::Autocast)");
    if constexpr (std::is_same_v<D, DX> && std::is_same_v<D, DH> && std::is_same_v<D, DC> &&
                  detail::takes_activation_v<T, TX>) {
      if constexpr (detail::autocasts_v<T, TX>) {  // float under a guard: as PyTorch's autocast, in L
        const auto low = amp::detail::state().low;
        if (low == amp::detail::Low::bfloat16) return autocast_float<bfloat16>(x, h0, c0);
        if (low == amp::detail::Low::float16) return autocast_float<half>(x, h0, c0);
      }
      if (layers_.empty()) throw Error("et: LSTM: called before it was constructed with its sizes");
      if constexpr (std::is_same_v<TX, T>) {
        return lstm(x, h0, c0, layers_);
      } else {
        std::vector<LSTMLayer<TX, D>> low(layers_.size());
        for (std::size_t l = 0; l != layers_.size(); ++l) {
          low[l].weight_ih = detail::in_type<TX>(layers_[l].weight_ih, "LSTM");
          low[l].weight_hh = detail::in_type<TX>(layers_[l].weight_hh, "LSTM");
          if (layers_[l].bias_ih.defined()) {
            low[l].bias_ih = detail::in_type<TX>(layers_[l].bias_ih, "LSTM");
            low[l].bias_hh = detail::in_type<TX>(layers_[l].bias_hh, "LSTM");
          }
        }
        return lstm(x, h0, c0, low);
      }
    } else {
      return {};
    }
  }

 private:
  std::vector<LSTMLayer<T, D>> layers_;

  /// Float activations and states under et::amp::Autocast<L>: cast to L, computed in L, the
  /// output and the final states returned as float (their L values).
  template <class L>
  LSTMResult<float, D> autocast_float(const Tensor<float, 3, D>& x, const Tensor<float, 3, D>& h0,
                                      const Tensor<float, 3, D>& c0) {
    using X = Tensor<L, 3, D>;
    const auto [y, h, c] = forward(X(cast<L>(x)), X(cast<L>(h0)), X(cast<L>(c0)));
    using F = Tensor<float, 3, D>;
    return {F(cast<float>(y)), F(cast<float>(h)), F(cast<float>(c))};
  }
};

}  // namespace et::nn
