// The random op-gradient family's matrix products, linear layers, convolution, pooling,
// normalization, dropout and losses (random_op_grad_cases.hpp has the method).
#pragma once

#include "random_op_grad_setup.hpp"

namespace test::op_grad {

// --- Matrix products -------------------------------------------------------------------------------

/// matmul(a, b) with a and b of rank 2 or 3 (batches broadcast), read through their leaves'
/// layouts (a permuted leaf is a transposed matrix); for rank 3 and 3, also inside an
/// expression.
struct Matmul : OpCase {
  static constexpr const char* name = "matmul(a, b)";
  int ranks = 0;  // a's rank - 2 + 2 (b's rank - 2)
  bool in_expression = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    ranks = static_cast<int>(rng() % 4);
    const std::int64_t m = any_extent(rng), k = any_extent(rng), n = any_extent(rng), batch = between(rng, 1, 3);
    const int broadcast = static_cast<int>(rng() % 3);  // 1: a's batch is 1, 2: b's
    Extents a{m, k}, b{k, n};
    if (ranks & 1) a.insert(a.begin(), broadcast == 1 ? 1 : batch);
    if (ranks & 2) b.insert(b.begin(), broadcast == 2 ? 1 : batch);
    s.add(a, rng, -2, 2);
    s.add(b, rng, -2, 2);
    in_expression = ranks == 3 && coin(rng);
    if (in_expression) s.note("as 0.5 * matmul(a, b) + 1");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    if (ranks == 0) e.output(et::eval(et::matmul(e.template input<2>(0), e.template input<2>(1))));
    if (ranks == 1) e.output(et::eval(et::matmul(e.template input<3>(0), e.template input<2>(1))));
    if (ranks == 2) e.output(et::eval(et::matmul(e.template input<2>(0), e.template input<3>(1))));
    if (ranks != 3) return;
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    if (in_expression) e.output(et::eval(0.5 * et::matmul(a, b) + 1.0));
    else e.output(et::eval(et::matmul(a, b)));
  }
};

/// act(matmul(a, w) + bias), recorded as one linear-layer node.
struct LinearNode : OpCase {
  static constexpr const char* name = "act(matmul(a, w) + bias) (one node)";
  int form = 0;
  static constexpr const char* forms[] = {"matmul(a, w) + bias", "bias + matmul(a, w)", "relu(matmul(a, w) + bias)",
                                          "relu(matmul(a, w))", "gelu_tanh(matmul(a, w) + bias)",
                                          "gelu_tanh(matmul(a, w))"};
  bool has_bias() const { return form != 3 && form != 5; }
  void draw(OpSetup& s, std::mt19937_64& rng) {
    form = static_cast<int>(rng() % 6);
    const std::int64_t m = any_extent(rng), k = any_extent(rng), n = any_extent(rng);
    s.add({m, k}, rng, -2, 2);
    s.add({k, n}, rng, -2, 2);
    if (has_bias()) s.add({n}, rng, -2, 2);
    s.note(forms[form]);
  }
  /// relu: every pre-activation at least 1e-3 from 0.
  bool acceptable(const OpSetup& s) const {
    if (form != 2 && form != 3) return true;
    const auto a = s.inputs[0].logical(), w = s.inputs[1].logical();
    const std::vector<double> bias = has_bias() ? s.inputs[2].logical() : std::vector<double>{};
    const std::int64_t m = s.inputs[0].shape[0], k = s.inputs[0].shape[1], n = s.inputs[1].shape[1];
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double z = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(j)];
        for (std::int64_t l = 0; l < k; ++l) z += a[static_cast<std::size_t>(i * k + l)] * w[static_cast<std::size_t>(l * n + j)];
        if (std::fabs(z) < 1e-3) return false;
      }
    return true;
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<2>(0), w = e.template input<2>(1);
    et::Tensor<double, 2, D> out;  // a new tensor: the one-node path
    if (form == 3) out = et::relu(et::matmul(a, w));
    else if (form == 5) out = et::gelu_tanh(et::matmul(a, w));
    else {
      const auto bias = e.template input<1>(2);
      if (form == 0) out = et::matmul(a, w) + bias;
      else if (form == 1) out = bias + et::matmul(a, w);
      else if (form == 2) out = et::relu(et::matmul(a, w) + bias);
      else out = et::gelu_tanh(et::matmul(a, w) + bias);
    }
    e.output(out);
  }
};

/// nn::Linear's forward on [N, in] or [B, N, in], its weight and bias the inputs.
struct LinearModule : OpCase {
  static constexpr const char* name = "nn::Linear (x W^T + b)";
  bool batched = false, bias = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    batched = coin(rng), bias = coin(rng);
    const std::int64_t in = any_extent(rng), out = any_extent(rng);
    Extents x{any_extent(rng), in};
    if (batched) x.insert(x.begin(), any_extent(rng));
    s.add(x, rng, -2, 2);
    s.add({out, in}, rng, -2, 2);
    if (bias) s.add({out}, rng, -2, 2);
    s.note(std::string(batched ? "[B, N, in]" : "[N, in]") + (bias ? ", bias" : ", no bias"));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::Linear<double, D> layer;
    layer.weight = e.template input<2>(1);
    if (bias) layer.bias = e.template input<1>(2);
    if (batched) e.output(layer(e.template input<3>(0)));
    else e.output(layer(e.template input<2>(0)));
  }
};

// --- Convolution, pooling, normalization, losses ---------------------------------------------

inline Extents in_layout(et::Layout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return layout == et::Layout::nhwc ? Extents{n, h, w, c} : Extents{n, c, h, w};
}
inline std::string pair_words(const char* what, const std::array<std::int64_t, 2>& v) {
  return std::string(what) + " {" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "}";
}

struct Conv : OpCase {
  static constexpr const char* name = "conv2d(x, w[, bias], options)";
  et::Conv2dOptions options;
  bool bias = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    options.groups = between(rng, 1, 2);
    options.layout = coin(rng) ? et::Layout::nhwc : et::Layout::nchw;
    options.allow_tf32 = false;
    const std::int64_t n = rng() % 8 == 0 ? 0 : between(rng, 1, 2);
    const std::int64_t c = options.groups * between(rng, 1, 2), k = options.groups * between(rng, 1, 2);
    std::int64_t h = 0, w = 0, r = 0, q = 0;
    do {
      h = between(rng, 1, 5), w = between(rng, 1, 5), r = between(rng, 1, 3), q = between(rng, 1, 3);
      options.stride = {between(rng, 1, 2), between(rng, 1, 2)};
      options.padding = {between(rng, 0, 1), between(rng, 0, 1)};
      options.dilation = {between(rng, 1, 2), between(rng, 1, 2)};
    } while (h + 2 * options.padding[0] < options.dilation[0] * (r - 1) + 1 ||
             w + 2 * options.padding[1] < options.dilation[1] * (q - 1) + 1);
    bias = coin(rng);
    s.add(in_layout(options.layout, n, c, h, w), rng);
    s.add(options.layout == et::Layout::nhwc ? Extents{k, r, q, c / options.groups} : Extents{k, c / options.groups, r, q},
          rng);
    if (bias) s.add({k}, rng);
    s.note(std::string(et::detail::layout_name(options.layout)) + ", groups " + std::to_string(options.groups) + ", " +
           pair_words("stride", options.stride) + ", " + pair_words("padding", options.padding) + ", " +
           pair_words("dilation", options.dilation) + (bias ? ", bias" : ""));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<4>(0), w = e.template input<4>(1);
    if (bias) e.output(et::conv2d(x, w, e.template input<1>(2), options));
    else e.output(et::conv2d(x, w, options));
  }
};

template <bool Max>
struct Pool : OpCase {
  static constexpr const char* name = Max ? "max_pool2d(x, options)" : "avg_pool2d(x, options)";
  et::Pool2dOptions options;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    options.layout = coin(rng) ? et::Layout::nhwc : et::Layout::nchw;
    options.count_include_pad = coin(rng);
    const std::int64_t n = rng() % 8 == 0 ? 0 : between(rng, 1, 2), c = between(rng, 1, 3);
    std::int64_t h = 0, w = 0;
    do {
      h = between(rng, 1, 5), w = between(rng, 1, 5);
      options.kernel = {between(rng, 1, 3), between(rng, 1, 3)};
      options.stride = {between(rng, 0, 2), between(rng, 0, 2)};
      options.padding = {between(rng, 0, options.kernel[0] / 2), between(rng, 0, options.kernel[1] / 2)};
    } while (h + 2 * options.padding[0] < options.kernel[0] || w + 2 * options.padding[1] < options.kernel[1]);
    s.add(in_layout(options.layout, n, c, h, w), rng);
    s.note(std::string(et::detail::layout_name(options.layout)) + ", " + pair_words("kernel", options.kernel) + ", " +
           pair_words("stride", options.stride) + ", " + pair_words("padding", options.padding) +
           (Max ? "" : options.count_include_pad ? ", padding counted" : ", padding not counted"));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<4>(0);
    if constexpr (Max) e.output(et::max_pool2d(x, options));
    else e.output(et::avg_pool2d(x, options));
  }
};

/// BatchNorm2d in training (batch statistics) or eval (running statistics, inputs without
/// gradient), its weight and bias inputs; alone, with its fused ReLU, or with a residual
/// (all the channels, or C' < C of them from an offset: option A) and ReLU or not.
struct BatchNorm : OpCase {
  static constexpr const char* name = "nn::BatchNorm2d, batch_norm_add";
  bool training = true, relu = false;
  int residual = 0;  // 0: none, 1: on every channel, 2: on C' channels from `offset`
  std::int64_t offset = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    training = rng() % 3 != 0;
    relu = coin(rng);
    residual = static_cast<int>(rng() % 3);
    const std::int64_t c = between(rng, 1, 3);
    std::int64_t n = 0, h = 0, w = 0;
    do n = any_extent(rng) % 3, h = any_extent(rng), w = any_extent(rng);
    while (training && n * h * w < 2);  // training needs two values per channel
    s.add({n, c, h, w}, rng);
    s.add({c}, rng, 0.5, 2);
    s.add({c}, rng, -1, 1);
    const std::int64_t channels = residual == 2 ? between(rng, 0, c) : c;
    offset = residual == 2 ? between(rng, 0, c - channels) : 0;
    if (residual) s.add({n, channels, h, w}, rng);
    if (!training) {
      s.add({c}, rng, -1, 1, false);
      s.add({c}, rng, 0.5, 2, false);
    }
    s.note(std::string(training ? "training" : "eval") + (relu ? ", relu" : "") +
           (residual ? ", residual at channel " + std::to_string(offset) : ""));
  }
  /// relu: every pre-activation at least 1e-3 from 0.
  bool acceptable(const OpSetup& s) const {
    if (!relu) return true;
    const Extents& shape = s.inputs[0].shape;
    const std::int64_t n = shape[0], c = shape[1], hw = shape[2] * shape[3];
    const auto x = s.inputs[0].logical(), w = s.inputs[1].logical(), b = s.inputs[2].logical();
    const std::vector<double> r = residual ? s.inputs[3].logical() : std::vector<double>{};
    const std::int64_t rc = residual ? s.inputs[3].shape[1] : 0;
    const std::size_t stats = residual ? 4 : 3;
    for (std::int64_t k = 0; k < c; ++k) {
      double mean = 0, var = 0;
      auto at = [&](std::int64_t i, std::int64_t p) { return static_cast<std::size_t>((i * c + k) * hw + p); };
      if (training) {
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t p = 0; p < hw; ++p) mean += x[at(i, p)] / double(n * hw);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t p = 0; p < hw; ++p) var += (x[at(i, p)] - mean) * (x[at(i, p)] - mean) / double(n * hw);
      } else {
        mean = s.inputs[stats].logical()[static_cast<std::size_t>(k)];
        var = s.inputs[stats + 1].logical()[static_cast<std::size_t>(k)];
      }
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t p = 0; p < hw; ++p) {
          double z = (x[at(i, p)] - mean) / std::sqrt(var + 1e-5) * w[static_cast<std::size_t>(k)] +
                     b[static_cast<std::size_t>(k)];
          if (k >= offset && k < offset + rc) z += r[static_cast<std::size_t>((i * rc + k - offset) * hw + p)];
          if (std::fabs(z) < 1e-3) return false;
        }
    }
    return true;
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::BatchNorm2d<double, D> norm(e.dev, e.setup.inputs[1].shape[0]);
    norm.weight = e.template input<1>(1);
    norm.bias = e.template input<1>(2);
    const std::size_t stats = residual ? 4 : 3;
    if (!training) {
      norm.running_mean = e.template input<1>(stats);
      norm.running_var = e.template input<1>(stats + 1);
      norm.eval();
    }
    const auto x = e.template input<4>(0);
    if (!residual) {
      e.output(relu ? norm.forward_relu(x) : norm(x));
    } else if (relu) {
      e.output(norm.forward_add_relu(x, e.template input<4>(3), offset));
    } else {
      e.output(et::batch_norm_add(x, e.template input<4>(3), norm.running_mean, norm.running_var, norm.weight,
                                  norm.bias, {.training = training}, offset));
    }
  }
};

struct Dropout : OpCase {
  static constexpr const char* name = "nn::Dropout(p, seed) (its mask fixed by the seed)";
  double p = 0.5;
  std::uint64_t seed = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    s.add(any_shape(rng), rng);
    p = 0.25 * static_cast<double>(between(rng, 1, 3));
    seed = rng();
    s.note("p " + std::to_string(p) + ", seed " + std::to_string(seed));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    et::nn::Dropout drop(p, seed);  // a new module: its first mask
    e.output(drop(e.template input<3>(0)));
  }
};

struct MseLoss : OpCase {
  static constexpr const char* name = "nn::mse_loss(prediction, target)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents shape = some_shape(rng);
    s.add(shape, rng);
    s.add(shape, rng);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::nn::mse_loss(e.template input<3>(0), e.template input<3>(1)));
  }
};

struct CrossEntropy : OpCase {
  static constexpr const char* name = "nn::cross_entropy(logits, labels)";
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const std::int64_t n = between(rng, 1, 5), classes = between(rng, 1, 5);
    s.add({n, classes}, rng);
    s.add_index({n}, rng, 0, classes - 1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::nn::cross_entropy(e.template input<2>(0), e.template index<1>()));
  }
};

}  // namespace test::op_grad
