// Multi-head attention, PyTorch's nn.MultiheadAttention (its parameter names, layouts and
// initialization, so weights move between the two through safetensors):
//
//   et::nn::MultiheadAttention<float, D> mha(dev, 768, 12, {.batch_first = true}, seed);
//   auto y = mha(x);                            // self-attention, x [B, T, E] -> [B, T, E]
//   auto y2 = mha.forward(q, k, v, {.causal = true});   // [T, B, E] unless batch_first
//
//   in_proj_weight [3E, E] (q, k, v stacked; Xavier-uniform), in_proj_bias [3E] (zeros),
//   out_proj.weight [E, E], out_proj.bias [E] (zeros): members in this order.
//
// Self-attention takes one GEMM for q, k and v together; distinct inputs one each. Heads go
// through et::scaled_dot_product_attention; dropout applies to the attention weights in
// training (each call a new mask). Only the output is returned (need_weights=False);
// attention masks other than the causal one are not taken.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "et/amp/autocast.hpp"
#include "et/nn/init.hpp"
#include "et/nn/layers.hpp"
#include "et/nn/module.hpp"
#include "et/ops/attention.hpp"

namespace et::nn {

struct MultiheadAttentionOptions {
  bool bias = true;
  bool batch_first = false;  ///< [B, T, E] rather than PyTorch's default [T, B, E]
  double dropout = 0;        ///< on the attention weights, in training
};

/// What forward(q, k, v, call) takes besides the inputs.
struct AttentionCall {
  bool causal = false;
};

template <class T, Device D>
class MultiheadAttention : public Module<MultiheadAttention<T, D>> {
 public:
  Tensor<T, 2, D> in_proj_weight;
  Tensor<T, 1, D> in_proj_bias;
  Linear<T, D> out_proj;
  MultiheadAttentionOptions options;
  std::int64_t embed_dim = 0, num_heads = 0;

  MultiheadAttention() = default;
  /// Throws ShapeError unless embed_dim and num_heads are positive and num_heads divides
  /// embed_dim; et::Error for a dropout outside [0, 1).
  MultiheadAttention(D dev, std::int64_t embed_dim, std::int64_t num_heads, const MultiheadAttentionOptions& options = {},
                     std::uint64_t seed = 0)
      : out_proj(dev, embed_dim > 0 ? embed_dim : 1, embed_dim > 0 ? embed_dim : 1, detail::derive_seed(seed, 2),
                 options.bias),
        options(options),
        embed_dim(embed_dim),
        num_heads(num_heads),
        seed_(seed) {
    detail::require_positive("MultiheadAttention", "embed_dim", embed_dim);
    detail::require_positive("MultiheadAttention", "num_heads", num_heads);
    if (embed_dim % num_heads != 0)
      throw ShapeError("et: MultiheadAttention: embed_dim (" + std::to_string(embed_dim) +
                       ") must be divisible by num_heads (" + std::to_string(num_heads) + ")");
    if (!(options.dropout >= 0 && options.dropout < 1))
      throw Error("et: MultiheadAttention: dropout must be in [0, 1), got " + std::to_string(options.dropout));
    const std::int64_t rows = detail::size_product("MultiheadAttention", "3 * embed_dim", {3, embed_dim});
    in_proj_weight = detail::constant_parameter<T, 2>(dev, Shape<2>{rows, embed_dim}, T(0));
    {
      NoGradGuard no_grad;
      init::xavier_uniform_(in_proj_weight, detail::derive_seed(seed, 0));
    }
    if (options.bias) {
      in_proj_bias = detail::constant_parameter<T, 1>(dev, Shape<1>{rows}, T(0));
      out_proj.bias = detail::constant_parameter<T, 1>(dev, Shape<1>{embed_dim}, T(0));
    }
  }

  auto members() {
    return et::nn::members("in_proj_weight", in_proj_weight, "in_proj_bias", in_proj_bias, "out_proj", out_proj,
                           "options", options, "embed_dim", embed_dim, "num_heads", num_heads, "seed", seed_, "calls",
                           calls_);
  }

  /// Self-attention: forward(x, x, x, call) with one GEMM for the three projections.
  template <class TX, class DX>
  Tensor<TX, 3, D> forward(const Tensor<TX, 3, DX>& x, const AttentionCall& call = {}) {
    return attend(x, x, x, call, true);
  }
  /// query [Tq, B, E], key and value [Tk, B, E] ([B, T, E] with batch_first) -> [Tq, B, E].
  template <class TX, class DX>
  Tensor<TX, 3, D> forward(const Tensor<TX, 3, DX>& query, const Tensor<TX, 3, DX>& key, const Tensor<TX, 3, DX>& value,
                           const AttentionCall& call = {}) {
    return attend(query, key, value, call, false);
  }

 private:
  template <class TX, class DX>
  Tensor<TX, 3, D> attend(const Tensor<TX, 3, DX>& query, const Tensor<TX, 3, DX>& key, const Tensor<TX, 3, DX>& value,
                          const AttentionCall& call, bool self) {
    [[maybe_unused]] et::detail::same_devices<D, DX> devices;
    static_assert(detail::takes_activation_v<T, TX>,
                  "et: MultiheadAttention<T, D> takes tensors of its element type T, or et::bfloat16 / et::half ones "
                  "when T is float (mixed precision, et::amp::Autocast)");
    if constexpr (std::is_same_v<D, DX> && detail::takes_activation_v<T, TX>) {
      if constexpr (detail::autocasts_v<T, TX>) {
        if (const auto low = amp::detail::state().low; low != amp::detail::Low::none) {
          return detail::autocast_float(low, query, [&](const auto& q) {
            if (self) return attend(q, q, q, call, true);
            using Low = typename std::remove_cvref_t<decltype(q)>::value_type;
            return attend(q, Tensor<Low, 3, D>(cast<Low>(key)), Tensor<Low, 3, D>(cast<Low>(value)), call, false);
          });
        }
      }
      if (!in_proj_weight.defined()) throw Error("et: MultiheadAttention: called before it was constructed with its sizes");
      check(query, "query");
      check(key, "key");
      check(value, "value");
      const int t_axis = options.batch_first ? 1 : 0, b_axis = 1 - t_axis;
      if (key.size(b_axis) != query.size(b_axis) || value.size(b_axis) != query.size(b_axis) ||
          value.size(t_axis) != key.size(t_axis))
        throw ShapeError("et: MultiheadAttention: query " + format_shape(query.shape()) + ", key " +
                         format_shape(key.shape()) + " and value " + format_shape(value.shape()) +
                         " must have one batch size, and key and value one length");
      const std::int64_t e = embed_dim;
      const Tensor<TX, 2, D> w = detail::in_type<TX>(in_proj_weight, "MultiheadAttention");
      const Tensor<TX, 1, D> b =
          in_proj_bias.defined() ? detail::in_type<TX>(in_proj_bias, "MultiheadAttention") : Tensor<TX, 1, D>{};
      const auto project = [&](const Tensor<TX, 3, D>& x, std::int64_t from, std::int64_t to) {
        const Tensor<TX, 2, D> flat = x.reshape({x.size(0) * x.size(1), e});
        const auto wt = w.slice(0, from, to).transpose(0, 1);
        if (b.defined()) return Tensor<TX, 2, D>(matmul(flat, wt) + b.slice(0, from, to));
        return Tensor<TX, 2, D>(matmul(flat, wt));
      };
      const auto [q, k, v] = [&] {
        if (!self) return std::tuple{heads(project(query, 0, e), query), heads(project(key, e, 2 * e), key),
                                     heads(project(value, 2 * e, 3 * e), value)};
        const Tensor<TX, 2, D> qkv = project(query, 0, 3 * e);
        return std::tuple{heads(qkv.slice(1, 0, e), query), heads(qkv.slice(1, e, 2 * e), query),
                          heads(qkv.slice(1, 2 * e, 3 * e), query)};
      }();
      const double p = this->is_training() ? options.dropout : 0.0;
      const Tensor<TX, 4, D> o = scaled_dot_product_attention(
          q, k, v, {.causal = call.causal, .dropout_p = p, .seed = p > 0 ? detail::derive_seed(seed_, calls_++) : 0});
      // [B, H, T, Dh] -> [T, B, H, Dh] (or [B, T, H, Dh]) -> [T B, E] -> out_proj.
      const Tensor<TX, 4, D> back = options.batch_first ? o.permute({0, 2, 1, 3}) : o.permute({2, 0, 1, 3});
      const Tensor<TX, 2, D> merged = back.reshape({back.size(0) * back.size(1), e});  // the one copy
      return out_proj(merged).reshape({back.size(0), back.size(1), e});
    } else {
      return {};
    }
  }

  /// x's projection [T B, E'] (or [B T, E']) as [B, H, T, Dh].
  template <class TX>
  Tensor<TX, 4, D> heads(const Tensor<TX, 2, D>& projected, const Tensor<TX, 3, D>& x) const {
    const std::int64_t dh = embed_dim / num_heads;
    const Tensor<TX, 4, D> split = projected.reshape({x.size(0), x.size(1), num_heads, dh});  // a view
    return options.batch_first ? split.permute({0, 2, 1, 3}) : split.permute({1, 2, 0, 3});
  }

  template <class TX>
  void check(const Tensor<TX, 3, D>& x, const char* what) const {
    if (!x.defined()) throw Error(std::string("et: MultiheadAttention: the ") + what + " is an undefined tensor");
    if (x.size(2) != embed_dim)
      throw ShapeError("et: MultiheadAttention(" + std::to_string(embed_dim) + "): the " + what + " has shape " +
                       format_shape(x.shape()) + "; its last axis must be " + std::to_string(embed_dim));
  }

  std::uint64_t seed_ = 0, calls_ = 0;
};

}  // namespace et::nn
