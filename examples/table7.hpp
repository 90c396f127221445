// The networks of Shi et al.'s benchmark ("Benchmarking State-of-the-Art Deep Learning
// Software Tools", 2016, Table 7) that take 28x28 and 32x32 images, and its LSTM, as dlbench
// defines them (hclhkbu/dlbench), with PyTorch's parameter names so that weights move
// through safetensors:
//
//   fcn_r      784 -> 2048 -> 4096 -> 1024 -> 10, sigmoid, Xavier-uniform weights, zero biases
//   AlexNetR   cuda-convnet's "18pct" without local response normalization, 3x32x32 inputs
//   ResNet56   He et al.'s CIFAR network (n = 9: 6n + 2 = 56 layers, option-A shortcuts)
//   LstmLm     the word-level LSTM: Embedding 10000 -> 256, 2 LSTM layers of 256, Linear -> 10000
//
// FCN-S is examples/fcn_s.hpp; AlexNet-S and ResNet-50 are examples/table7_imagenet.hpp.
// Shared by the benchmarks, the examples and the tests.
#pragma once

#include <et/nn.hpp>

#include <cstdint>
#include <string>

namespace table7 {

/// FCN-R: 784 -> 2048 -> 4096 -> 1024 -> 10 with sigmoids; weights Xavier-uniform, biases 0.
/// `divisor` divides the hidden widths (the examples' small runs; 1 is Table 7's network).
template <class T, et::Device D>
auto fcn_r(D dev, std::uint64_t seed = 1, std::int64_t divisor = 1) {
  using Linear = et::nn::Linear<T, D>;
  const std::int64_t h1 = 2048 / divisor, h2 = 4096 / divisor, h3 = 1024 / divisor;
  auto model = et::nn::Sequential(Linear(dev, 784, h1), et::nn::Sigmoid{}, Linear(dev, h1, h2), et::nn::Sigmoid{},
                                  Linear(dev, h2, h3), et::nn::Sigmoid{}, Linear(dev, h3, 10));
  std::uint64_t k = 0;
  et::nn::for_each_tensor(model, [&](const std::string& name, const auto& t) {
    if (name.ends_with("weight")) et::nn::init::xavier_uniform_(t, seed + k++);
    else et::nn::init::zeros_(t);
  });
  return model;
}

/// AlexNet-R, [N, 3, 32, 32] -> [N, 10]: conv 32 5x5 pad 2, max-pool 3/2, ReLU; conv 32 5x5
/// pad 2, ReLU, max-pool 3/2; conv 64 5x5 pad 2, ReLU, average-pool 3/2; Linear 576 -> 10
/// (pooling windows that end inside the input only, as PyTorch's floor mode).
template <class T, et::Device D>
auto alexnet_r(D dev, std::uint64_t seed = 1) {
  using Conv = et::nn::Conv2d<T, D>;
  const et::Conv2dOptions same{.padding = {2, 2}};
  return et::nn::Sequential(Conv(dev, 3, 32, 5, same, seed), et::nn::MaxPool2d(3, 2), et::nn::ReLU{},
                            Conv(dev, 32, 32, 5, same, seed + 1), et::nn::ReLU{}, et::nn::MaxPool2d(3, 2),
                            Conv(dev, 32, 64, 5, same, seed + 2), et::nn::ReLU{}, et::nn::AvgPool2d(3, 2),
                            et::nn::Flatten{}, et::nn::Linear<T, D>(dev, 576, 10, seed + 3));
}

/// The ResNets' convolution: `kernel` x `kernel` with padding kernel / 2, no bias,
/// He-normal initialized as torchvision's (the 7x7 stem, the 3x3s and the 1x1s).
template <class T, et::Device D>
et::nn::Conv2d<T, D> he_conv(D dev, std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                             std::uint64_t seed) {
  const std::int64_t pad = kernel / 2;
  et::nn::Conv2d<T, D> conv(dev, in, out, kernel, {.stride = {stride, stride}, .padding = {pad, pad}}, seed, false);
  et::nn::init::kaiming_normal_(conv.weight, seed, {.mode = et::nn::init::FanMode::fan_out});
  return conv;
}

// [guide:resnet-block]
/// ResNet-56's block: conv 3x3 (stride), BN, ReLU, conv 3x3, BN, plus the shortcut, ReLU.
/// Where the block halves the plane and doubles the channels, the shortcut is option A: the
/// input subsampled by 2 and padded with zero channels (He et al., 2016, section 4.2). Each
/// batch norm runs with what follows it in one pass (forward_relu, forward_add_relu), and
/// option A's zero channels are never made: the subsampled input is added to the middle
/// channels alone.
template <class T, class D>
struct BasicBlock : et::nn::Module<BasicBlock<T, D>> {
  et::nn::Conv2d<T, D> conv1, conv2;
  et::nn::BatchNorm2d<T, D> bn1, bn2;
  std::int64_t stride = 1, extra_channels = 0;

  BasicBlock() = default;
  BasicBlock(D dev, std::int64_t in, std::int64_t out, std::int64_t stride, std::uint64_t seed)
      : conv1(he_conv<T>(dev, in, out, 3, stride, seed)),
        conv2(he_conv<T>(dev, out, out, 3, 1, seed + 1)),
        bn1(dev, out),
        bn2(dev, out),
        stride(stride),
        extra_channels(out - in) {}
  auto members() {
    return et::nn::members("conv1", conv1, "bn1", bn1, "conv2", conv2, "bn2", bn2, "stride", stride, "extra_channels",
                           extra_channels);
  }
  /// X: T, or a 16-bit type under et::amp::Autocast (mixed precision, float parameters).
  template <class X>
  et::Tensor<X, 4, D> forward(const et::Tensor<X, 4, D>& x) {
    const et::Tensor<X, 4, D> h = bn1.forward_relu(conv1(x));              // relu(bn1(conv1(x)))
    return bn2.forward_add_relu(conv2(h), shortcut(x), extra_channels / 2);  // relu(bn2(conv2(h)) + shortcut)
  }
  /// The shortcut's values: x, or (option A) x at every stride-th row and column, which
  /// forward adds to channels [extra_channels / 2, extra_channels / 2 + in).
  template <class X>
  et::Tensor<X, 4, D> shortcut(const et::Tensor<X, 4, D>& x) const {
    if (stride == 1) return x;
    return x.slice(2, 0, x.size(2), stride).slice(3, 0, x.size(3), stride);
  }
};
// [guide:end]

/// ResNet-56, [N, 3, 32, 32] -> [N, 10]: conv 16 3x3, BN, ReLU; three stages of 9 blocks of
/// 16, 32 and 64 channels (the first block of stages 2 and 3 strides 2); global average
/// pooling; Linear 64 -> 10. 853,018 parameters.
template <class T, class D>
struct ResNet56 : et::nn::Module<ResNet56<T, D>> {
  et::nn::Conv2d<T, D> conv1;
  et::nn::BatchNorm2d<T, D> bn1;
  et::nn::ModuleList<BasicBlock<T, D>> layer1, layer2, layer3;
  et::nn::AdaptiveAvgPool2d pool{{1, 1}};
  et::nn::Linear<T, D> fc;

  ResNet56() = default;
  explicit ResNet56(D dev, std::uint64_t seed = 1)
      : conv1(he_conv<T>(dev, 3, 16, 3, 1, seed)), bn1(dev, 16), fc(dev, 64, 10, seed + 1) {
    std::int64_t in = 16;
    std::uint64_t next = seed + 2;
    for (auto [layer, width] : {std::pair{&layer1, 16}, std::pair{&layer2, 32}, std::pair{&layer3, 64}}) {
      for (int b = 0; b < 9; ++b, next += 2) {
        layer->push_back(BasicBlock<T, D>(dev, in, width, b == 0 && width != 16 ? 2 : 1, next));
        in = width;
      }
    }
  }
  auto members() {
    return et::nn::members("conv1", conv1, "bn1", bn1, "layer1", layer1, "layer2", layer2, "layer3", layer3, "fc", fc);
  }
  template <class X>  // T, or a 16-bit type under et::amp::Autocast
  et::Tensor<X, 2, D> forward(const et::Tensor<X, 4, D>& x) {
    et::Tensor<X, 4, D> h = bn1.forward_relu(conv1(x));
    for (auto* layer : {&layer1, &layer2, &layer3})
      for (auto& block : *layer) h = block(h);
    return fc(et::nn::Flatten{}(pool(h)));
  }
};

/// The LSTM of Table 7, a word-level language model: Embedding 10000 -> 256, two LSTM layers
/// of 256, Linear 256 -> 10000 at every step. Token ids [seq, batch] -> logits
/// [seq * batch, vocabulary] (step-major, as the targets are flattened), from zero states
/// (each batch of 32 steps is one truncated back-propagation through time).
template <class T, class D>
struct LstmLm : et::nn::Module<LstmLm<T, D>> {
  et::nn::Embedding<T, D> embedding;
  et::nn::LSTM<T, D> lstm;
  et::nn::Linear<T, D> decoder;

  LstmLm() = default;
  explicit LstmLm(D dev, std::int64_t vocabulary = 10000, std::int64_t width = 256, std::uint64_t seed = 1)
      : embedding(dev, vocabulary, width, seed), lstm(dev, width, width, {.num_layers = 2}, seed + 1),
        decoder(dev, width, vocabulary, seed + 2) {}
  auto members() { return et::nn::members("embedding", embedding, "lstm", lstm, "decoder", decoder); }

  /// X: the type the LSTM and the decoder compute in, T or (under et::amp::Autocast of it)
  /// a 16-bit type, to which the embeddings are cast: model.template forward<et::bfloat16>(tokens).
  template <class X = T>
  et::Tensor<X, 2, D> forward(const et::Tensor<std::int64_t, 2, D>& tokens) {
    const auto [y, h, c] = lstm(et::Tensor<X, 3, D>(et::cast<X>(embedding(tokens))));
    return decoder(y.reshape({y.size(0) * y.size(1), y.size(2)}));
  }
};

}  // namespace table7
