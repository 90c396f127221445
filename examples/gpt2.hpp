// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel names and lays out its
// weights, so that a model.safetensors moves between the two (et::nn::save / load):
//
//   transformer.wte.weight [V, E]            transformer.wpe.weight [P, E]
//   transformer.h.{i}.ln_1.weight, .bias     transformer.h.{i}.attn.c_attn.weight [E, 3E], .bias [3E]
//   transformer.h.{i}.attn.c_proj.weight [E, E], .bias    transformer.h.{i}.ln_2.weight, .bias
//   transformer.h.{i}.mlp.c_fc.weight [E, 4E], .bias      transformer.h.{i}.mlp.c_proj.weight [4E, E], .bias
//   transformer.ln_f.weight, .bias           (lm_head.weight is transformer.wte.weight: tied)
//
// HF's Conv1D keeps its weight as [in, out] (y = x W + b), the transpose of nn.Linear's.
// A block: h = x + attn(ln_1(x)); x' = h + mlp(ln_2(h)), the attention causal, the MLP's
// GELU the tanh approximation (fused into the c_fc GEMM on CUDA), the residual additions
// fused with the next normalization (et::add_layer_norm). The logits are ln_f(x) wte^T.
// Initialization as GPT-2's: N(0, 0.02) weights (the residual projections' scaled by
// 1 / sqrt(2 n_layer)), zero biases, unit LayerNorms.
#pragma once

#include <et/nn.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace gpt2 {

struct Config {
  std::int64_t vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12;
  double layer_norm_epsilon = 1e-5;
};

/// N(0, std) values for a parameter of T (the GPT-2 initialization).
template <class T, int R, class D>
et::Tensor<T, R, D> normal_parameter(D dev, const et::Shape<R>& shape, double std, std::uint64_t seed) {
  auto t = et::empty<T>(dev, shape);
  et::nn::init::detail::fill_normal(t, seed, std);
  t.requires_grad_(true);
  return t;
}

/// Hugging Face's Conv1D: weight [in, out], bias [out]; y = x W + b.
template <class T, class D>
struct Conv1D : et::nn::Module<Conv1D<T, D>> {
  et::Tensor<T, 2, D> weight;
  et::Tensor<T, 1, D> bias;
  Conv1D() = default;
  Conv1D(D dev, std::int64_t in, std::int64_t out, double std, std::uint64_t seed)
      : weight(normal_parameter<T, 2>(dev, et::Shape<2>{in, out}, std, seed)),
        bias(et::zeros<T>(dev, et::Shape<1>{out})) {
    bias.requires_grad_(true);
  }
  auto members() { return et::nn::members("weight", weight, "bias", bias); }
  /// The product alone (epilogues are the caller's: gelu_tanh(product + bias) is one GEMM).
  template <class TX>
  auto product(const et::Tensor<TX, 3, D>& x) const {
    return et::matmul(x, et::nn::detail::in_type<TX>(weight, "Conv1D"));
  }
  template <class TX>
  et::Tensor<TX, 1, D> b() const {
    return et::nn::detail::in_type<TX>(bias, "Conv1D");
  }
  template <class TX>
  et::Tensor<TX, 3, D> forward(const et::Tensor<TX, 3, D>& x) {
    return product(x) + b<TX>();
  }
};

template <class T, class D>
struct Attention : et::nn::Module<Attention<T, D>> {
  Conv1D<T, D> c_attn, c_proj;
  std::int64_t n_head = 1;
  Attention() = default;
  Attention(D dev, const Config& c, std::uint64_t seed)
      : c_attn(dev, c.n_embd, 3 * c.n_embd, 0.02, seed),
        c_proj(dev, c.n_embd, c.n_embd, 0.02 / std::sqrt(2.0 * double(c.n_layer)), seed + 1),
        n_head(c.n_head) {}
  auto members() { return et::nn::members("c_attn", c_attn, "c_proj", c_proj, "n_head", n_head); }
  /// x [B, T, E] -> [B, T, E]: causal self-attention over n_head heads.
  template <class TX>
  et::Tensor<TX, 3, D> forward(const et::Tensor<TX, 3, D>& x) {
    const std::int64_t b = x.size(0), t = x.size(1), e = x.size(2), dh = e / n_head;
    const et::Tensor<TX, 3, D> qkv = c_attn(x);  // [B, T, 3E]
    const auto head = [&](std::int64_t part) {  // [B, T, E] slice -> [B, H, T, Dh]
      return qkv.slice(2, part * e, (part + 1) * e).reshape({b, t, n_head, dh}).permute({0, 2, 1, 3});  // views
    };
    const et::Tensor<TX, 4, D> o = et::scaled_dot_product_attention(head(0), head(1), head(2), {.causal = true});
    const et::Tensor<TX, 3, D> merged = o.permute({0, 2, 1, 3}).reshape({b, t, e});
    return c_proj(merged);
  }
};

template <class T, class D>
struct Mlp : et::nn::Module<Mlp<T, D>> {
  Conv1D<T, D> c_fc, c_proj;
  Mlp() = default;
  Mlp(D dev, const Config& c, std::uint64_t seed)
      : c_fc(dev, c.n_embd, 4 * c.n_embd, 0.02, seed),
        c_proj(dev, 4 * c.n_embd, c.n_embd, 0.02 / std::sqrt(2.0 * double(c.n_layer)), seed + 1) {}
  auto members() { return et::nn::members("c_fc", c_fc, "c_proj", c_proj); }
  template <class TX>
  et::Tensor<TX, 3, D> forward(const et::Tensor<TX, 3, D>& x) {
    const et::Tensor<TX, 3, D> hidden = et::gelu_tanh(c_fc.product(x) + c_fc.template b<TX>());  // one GEMM on CUDA
    return c_proj(hidden);
  }
};

template <class T, class D>
struct Block : et::nn::Module<Block<T, D>> {
  et::nn::LayerNorm<T, D> ln_1;
  Attention<T, D> attn;
  et::nn::LayerNorm<T, D> ln_2;
  Mlp<T, D> mlp;
  Block() = default;
  Block(D dev, const Config& c, std::uint64_t seed)
      : ln_1(dev, c.n_embd, {.eps = c.layer_norm_epsilon}),
        attn(dev, c, seed),
        ln_2(dev, c.n_embd, {.eps = c.layer_norm_epsilon}),
        mlp(dev, c, seed + 2) {}
  auto members() { return et::nn::members("ln_1", ln_1, "attn", attn, "ln_2", ln_2, "mlp", mlp); }
  /// (x, ln_1(x)) -> (x', the next block's ln_1(x') when `next` is given, else x'): the
  /// residual additions fused with the normalizations that follow them.
  template <class TX>
  std::tuple<et::Tensor<TX, 3, D>, et::Tensor<TX, 3, D>> forward(const et::Tensor<TX, 3, D>& x,
                                                                 const et::Tensor<TX, 3, D>& normed,
                                                                 et::nn::LayerNorm<T, D>& next) {
    const auto [h, m] = ln_2.forward_add(x, attn(normed));
    auto [out, out_normed] = next.forward_add(h, mlp(m));
    return {out, out_normed};
  }
};

template <class T, class D>
struct Transformer : et::nn::Module<Transformer<T, D>> {
  et::nn::Embedding<T, D> wte, wpe;
  et::nn::ModuleList<Block<T, D>> h;
  et::nn::LayerNorm<T, D> ln_f;
  auto members() { return et::nn::members("wte", wte, "wpe", wpe, "h", h, "ln_f", ln_f); }
};

/// GPT2LMHeadModel: forward(tokens [B, T]) -> logits [B, T, V]; loss(tokens, targets).
template <class T, class D>
class Model : public et::nn::Module<Model<T, D>> {
 public:
  Transformer<T, D> transformer;
  Config config;

  Model() = default;
  Model(D dev, const Config& c, std::uint64_t seed = 0) : config(c) {
    if (c.n_embd % c.n_head != 0) throw et::ShapeError("gpt2: n_embd must be divisible by n_head");
    transformer.wte = et::nn::Embedding<T, D>(dev, c.vocab_size, c.n_embd);
    transformer.wpe = et::nn::Embedding<T, D>(dev, c.n_positions, c.n_embd);
    transformer.wte.weight = normal_parameter<T, 2>(dev, et::Shape<2>{c.vocab_size, c.n_embd}, 0.02, seed);
    transformer.wpe.weight = normal_parameter<T, 2>(dev, et::Shape<2>{c.n_positions, c.n_embd}, 0.01, seed + 1);
    for (std::int64_t i = 0; i < c.n_layer; ++i) transformer.h.push_back(Block<T, D>(dev, c, seed + 10 + 4 * i));
    transformer.ln_f = et::nn::LayerNorm<T, D>(dev, c.n_embd, {.eps = c.layer_norm_epsilon});
  }
  auto members() { return et::nn::members("transformer", transformer, "config", config); }

  /// tokens [B, T] (T <= n_positions, each in [0, V)) -> logits [B, T, V] of TX (T, or bfloat16
  /// under et::amp::Autocast for a float model).
  template <class TX = T>
  et::Tensor<TX, 3, D> forward(const et::Tensor<std::int64_t, 2, D>& tokens) {
    const std::int64_t t = tokens.size(1);
    if (t > config.n_positions)
      throw et::ShapeError("gpt2: a sequence of " + std::to_string(t) + " tokens is longer than the " +
                           std::to_string(config.n_positions) + " positions the model has");
    const auto positions = et::arange<std::int64_t>(D{}, t);
    const et::Tensor<T, 3, D> embedded = transformer.wte(tokens) + transformer.wpe(positions);
    et::Tensor<TX, 3, D> x = cast_to<TX>(embedded);
    et::Tensor<TX, 3, D> normed = transformer.h.size() > 0 ? transformer.h[0].ln_1(x) : x;
    for (std::size_t i = 0; i < transformer.h.size(); ++i) {
      auto& next = i + 1 < transformer.h.size() ? transformer.h[i + 1].ln_1 : transformer.ln_f;
      std::tie(x, normed) = transformer.h[i].forward(x, normed, next);
    }
    if (transformer.h.size() == 0) normed = transformer.ln_f(x);
    // The output layer is the token embedding (tied): its gradient adds to the embedding's.
    return et::matmul(normed, et::nn::detail::in_type<TX>(transformer.wte.weight, "gpt2").transpose(0, 1));
  }

  /// The mean cross-entropy of predicting targets [B, T] from tokens [B, T].
  template <class TX = T>
  et::Tensor<float, 0, D> loss(const et::Tensor<std::int64_t, 2, D>& tokens, const et::Tensor<std::int64_t, 2, D>& targets) {
    const et::Tensor<TX, 3, D> logits = forward<TX>(tokens);
    const std::int64_t n = logits.size(0) * logits.size(1);
    return et::nn::cross_entropy(logits.reshape({n, logits.size(2)}), targets.reshape({n}));
  }

  /// AdamW's two groups as GPT-2 trains: weight decay on the matrices (rank 2), none on the
  /// biases and LayerNorms.
  std::vector<et::optim::ParamGroup<T, D>> parameter_groups(double weight_decay) {
    std::vector<et::optim::Parameter<T, D>> decay, no_decay;
    et::nn::for_each_tensor(*this, [&](const std::string&, auto& tensor) {
      using V = std::remove_cvref_t<decltype(tensor)>;
      if constexpr (std::is_same_v<typename V::value_type, T>) {
        if (!tensor.defined() || !tensor.requires_grad()) return;
        (V::rank >= 2 ? decay : no_decay).emplace_back(tensor);
      }
    });
    return {{.params = decay, .weight_decay = weight_decay}, {.params = no_decay, .weight_decay = 0.0}};
  }

 private:
  template <class TX, class X>
  static et::Tensor<TX, 3, D> cast_to(const X& x) {
    if constexpr (std::is_same_v<typename X::value_type, TX>) return x;
    else return et::cast<TX>(x);
  }
};

}  // namespace gpt2
