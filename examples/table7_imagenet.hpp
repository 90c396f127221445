// The networks of Shi et al.'s Table 7 that take 3x224x224 images (batch 16 in the table),
// as dlbench defines them, with PyTorch's parameter names (safetensors move weights both ways):
//
//   alexnet_s  AlexNet as dlbench's Torch variant: no local response normalization, no
//              dropout, 62,378,344 parameters (not torchvision's AlexNet)
//   ResNet50   torchvision's resnet50 exactly: bottlenecks 3/4/6/3, the stride on the 3x3
//              convolution, 1x1 + BN projection shortcuts, 25,557,032 parameters
//
// The smaller networks are examples/table7.hpp. Shared by the benchmarks and the tests.
#pragma once

#include "table7.hpp"

namespace table7 {

/// AlexNet-S, [N, 3, 224, 224] -> [N, 1000].
template <class T, et::Device D>
auto alexnet_s(D dev, std::uint64_t seed = 1) {
  using Conv = et::nn::Conv2d<T, D>;
  using Linear = et::nn::Linear<T, D>;
  auto pad = [](std::int64_t p) { return et::Conv2dOptions{.padding = {p, p}}; };
  return et::nn::Sequential(
      Conv(dev, 3, 96, 11, {.stride = {4, 4}, .padding = {2, 2}}, seed), et::nn::ReLU{}, et::nn::MaxPool2d(3, 2),
      Conv(dev, 96, 256, 5, pad(2), seed + 1), et::nn::ReLU{}, et::nn::MaxPool2d(3, 2),
      Conv(dev, 256, 384, 3, pad(1), seed + 2), et::nn::ReLU{}, Conv(dev, 384, 384, 3, pad(1), seed + 3), et::nn::ReLU{},
      Conv(dev, 384, 256, 3, pad(1), seed + 4), et::nn::ReLU{}, et::nn::MaxPool2d(3, 2), et::nn::Flatten{},
      Linear(dev, 9216, 4096, seed + 5), et::nn::ReLU{}, Linear(dev, 4096, 4096, seed + 6), et::nn::ReLU{},
      Linear(dev, 4096, 1000, seed + 7));
}

/// torchvision's Bottleneck (ResNet v1.5): 1x1 -> 3x3 (stride) -> 1x1 x4, each with BN,
/// ReLU after the first two and after the sum with the shortcut; the shortcut is a 1x1
/// convolution and BN ("downsample") where the shape changes, else the input (then the
/// downsample's tensors are undefined: no parameters, and saved files name none, as
/// torchvision's).
template <class T, class D>
struct Bottleneck : et::nn::Module<Bottleneck<T, D>> {
  et::nn::Conv2d<T, D> conv1, conv2, conv3;
  et::nn::BatchNorm2d<T, D> bn1, bn2, bn3;
  et::nn::Sequential<et::nn::Conv2d<T, D>, et::nn::BatchNorm2d<T, D>> downsample;

  Bottleneck() = default;
  Bottleneck(D dev, std::int64_t in, std::int64_t width, std::int64_t stride, std::uint64_t seed)
      : conv1(he_conv<T>(dev, in, width, 1, 1, seed)),
        conv2(he_conv<T>(dev, width, width, 3, stride, seed + 1)),
        conv3(he_conv<T>(dev, width, 4 * width, 1, 1, seed + 2)),
        bn1(dev, width),
        bn2(dev, width),
        bn3(dev, 4 * width) {
    if (stride != 1 || in != 4 * width)
      downsample = et::nn::Sequential(he_conv<T>(dev, in, 4 * width, 1, stride, seed + 3),
                                      et::nn::BatchNorm2d<T, D>(dev, 4 * width));
  }
  auto members() {
    return et::nn::members("conv1", conv1, "bn1", bn1, "conv2", conv2, "bn2", bn2, "conv3", conv3, "bn3", bn3,
                           "downsample", downsample);
  }
  template <class X>  // T, or a 16-bit type under et::amp::Autocast
  et::Tensor<X, 4, D> forward(const et::Tensor<X, 4, D>& x) {
    const et::Tensor<X, 4, D> a = bn1.forward_relu(conv1(x));  // relu(bn1(conv1(x))), one pass after the convolution
    const et::Tensor<X, 4, D> b = bn2.forward_relu(conv2(a));
    if (!downsample.template get<0>().weight.defined()) return bn3.forward_add_relu(conv3(b), x);
    return bn3.forward_add_relu(conv3(b), downsample(x));  // relu(bn3(conv3(b)) + downsample(x))
  }
};

/// torchvision's resnet50, [N, 3, H, W] -> [N, 1000] (224x224 in the table; any plane of
/// 32x32 or more, through the adaptive average pooling): conv 64 7x7/2, BN, ReLU, max-pool
/// 3/2 pad 1; stages of 3, 4, 6, 3 bottlenecks of width 64, 128, 256, 512 (the first of
/// stages 2-4 strides 2); global average pooling; Linear 2048 -> 1000.
template <class T, class D>
struct ResNet50 : et::nn::Module<ResNet50<T, D>> {
  et::nn::Conv2d<T, D> conv1;
  et::nn::BatchNorm2d<T, D> bn1;
  et::nn::MaxPool2d maxpool{3, 2, 1};
  et::nn::ModuleList<Bottleneck<T, D>> layer1, layer2, layer3, layer4;
  et::nn::AdaptiveAvgPool2d avgpool{{1, 1}};
  et::nn::Linear<T, D> fc;

  ResNet50() = default;
  explicit ResNet50(D dev, std::uint64_t seed = 1)
      : conv1(he_conv<T>(dev, 3, 64, 7, 2, seed)), bn1(dev, 64), fc(dev, 2048, 1000, seed + 1) {
    struct Stage {
      et::nn::ModuleList<Bottleneck<T, D>>* layer;
      int blocks;
      std::int64_t width, stride;
    };
    std::int64_t in = 64;
    std::uint64_t next = seed + 2;
    for (const Stage& s : {Stage{&layer1, 3, 64, 1}, Stage{&layer2, 4, 128, 2}, Stage{&layer3, 6, 256, 2},
                           Stage{&layer4, 3, 512, 2}}) {
      for (int b = 0; b < s.blocks; ++b, next += 4) {
        s.layer->push_back(Bottleneck<T, D>(dev, in, s.width, b == 0 ? s.stride : 1, next));
        in = 4 * s.width;
      }
    }
  }
  auto members() {
    return et::nn::members("conv1", conv1, "bn1", bn1, "layer1", layer1, "layer2", layer2, "layer3", layer3, "layer4",
                           layer4, "fc", fc);
  }
  template <class X>  // T, or a 16-bit type under et::amp::Autocast
  et::Tensor<X, 2, D> forward(const et::Tensor<X, 4, D>& x) {
    et::Tensor<X, 4, D> h = maxpool(bn1.forward_relu(conv1(x)));
    for (auto* layer : {&layer1, &layer2, &layer3, &layer4})
      for (auto& block : *layer) h = block(h);
    return fc(et::nn::Flatten{}(avgpool(h)));
  }
};

}  // namespace table7
