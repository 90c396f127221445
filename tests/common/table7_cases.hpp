// The networks of Shi et al.'s Table 7 (examples/table7.hpp, examples/table7_imagenet.hpp),
// shared by the CPU and GPU tests (test_modules.cpp / .cu): parameter counts and names as
// PyTorch's (dlbench's and torchvision's definitions), initializations, output shapes, the
// option-A shortcut's values, and a training step that reaches every parameter.
#pragma once

#include "../../examples/table7_imagenet.hpp"
#include "reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace test {

template <class M>
std::int64_t parameter_count(const M& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

/// The dotted names of the defined tensors (what et::nn::save writes).
template <class M>
std::vector<std::string> defined_names(M& m) {
  std::vector<std::string> names;
  et::nn::for_each_tensor(m, [&](const std::string& name, const auto& t) {
    if (t.defined()) names.push_back(name);
  });
  return names;
}

inline bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// One step of cross-entropy training on random data; true when every parameter then has a
/// finite, nonzero gradient.
template <class M, class X, class D>
bool every_parameter_learns(M& model, const X& x, D dev) {
  const auto labels = et::eval(et::cast<std::int64_t>(et::rand<float>(dev, {x.size(0)}, 5) * 10.0f));
  auto logits = model(x);
  et::nn::cross_entropy(logits, labels).backward();
  for (const auto& p : model.parameters()) {
    const auto g = p.grad();
    if (!g.defined()) return false;
    const auto values = g.to_vector();
    if (std::any_of(values.begin(), values.end(), [](float v) { return !std::isfinite(v); })) return false;
    if (std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; })) return false;
  }
  return true;
}

template <class D>
void check_table7_small_networks() {
  SECTION("FCN-R: 14,205,962 parameters, Xavier-uniform weights, zero biases") {
    auto fcn = table7::fcn_r<float>(D{});
    CHECK(parameter_count(fcn) == 14205962);
    const auto w = fcn.template get<0>().weight.to_vector();
    const double bound = std::sqrt(6.0 / (784 + 2048));
    CHECK(std::all_of(w.begin(), w.end(), [&](float v) { return std::abs(v) <= bound; }));
    CHECK(*std::max_element(w.begin(), w.end()) > 0.9 * bound);
    CHECK(fcn.template get<6>().bias.to_vector() == std::vector<float>(10, 0.0f));
    CHECK(fcn(et::rand<float>(D{}, {3, 784}, 1)).shape() == et::Shape<2>{3, 10});
  }
  SECTION("LSTM: PyTorch's 6,182,672 parameters and names; tokens [S, B] -> logits [S * B, V]; every parameter learns") {
    table7::LstmLm<float, D> full(D{});
    CHECK(parameter_count(full) == 6182672);
    CHECK(defined_names(full) ==
          std::vector<std::string>{"embedding.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0",
                                   "lstm.bias_hh_l0", "lstm.weight_ih_l1", "lstm.weight_hh_l1", "lstm.bias_ih_l1",
                                   "lstm.bias_hh_l1", "decoder.weight", "decoder.bias"});
    table7::LstmLm<float, D> small(D{}, 50, 8);
    const auto tokens = et::eval(et::cast<std::int64_t>(et::rand<float>(D{}, {5, 3}, 4) * 49.0f));
    const auto labels = et::eval(et::cast<std::int64_t>(et::rand<float>(D{}, {15}, 5) * 49.0f));
    const auto logits = small(tokens);
    CHECK(logits.shape() == et::Shape<2>{15, 50});
    et::nn::cross_entropy(logits, labels).backward();
    for (const auto& p : small.parameters()) {
      REQUIRE(p.grad().defined());
      const auto g = p.grad().to_vector();
      CHECK(std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); }));
      CHECK(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }));
    }
  }
  SECTION("AlexNet-R: 85,098 parameters, [N, 3, 32, 32] -> [N, 10], every parameter learns") {
    auto alex = table7::alexnet_r<float>(D{});
    CHECK(parameter_count(alex) == 85098);
    CHECK(every_parameter_learns(alex, et::randn<float>(D{}, {2, 3, 32, 32}, 2), D{}));
  }
  SECTION("ResNet-56: 853,018 parameters under PyTorch's names, every parameter learns (the step on the GPU)") {
    table7::ResNet56<float, D> resnet(D{});
    CHECK(parameter_count(resnet) == 853018);
    const auto names = defined_names(resnet);
    for (const char* name : {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer2.0.bn2.bias",
                             "layer3.8.conv2.weight", "fc.bias"})
      CHECK(has(names, name));
    CHECK(!has(names, "layer3.9.conv1.weight"));
    // Unoptimized and sanitized (the CPU tests), its convolutions take half a minute.
    if constexpr (D::is_cuda) CHECK(every_parameter_learns(resnet, et::randn<float>(D{}, {2, 3, 32, 32}, 3), D{}));
  }
  SECTION("ResNet-56's option-A block: relu(bn2(conv2(h)) + the input at every second row and column, zero channels around it)") {
    table7::BasicBlock<float, D> block(D{}, 16, 32, 2, 1), composed(D{}, 16, 32, 2, 1);  // the same weights
    const auto x = et::randn<float>(D{}, {2, 16, 6, 5}, 4);
    const auto sampled = block.shortcut(x);
    REQUIRE(sampled.shape() == et::Shape<4>{2, 16, 3, 3});
    const auto xs = x.to_vector(), ss = sampled.to_vector();
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 16; ++c)
        for (std::int64_t i = 0; i < 3; ++i)
          for (std::int64_t j = 0; j < 3; ++j)
            CHECK(ss[static_cast<std::size_t>(((n * 16 + c) * 3 + i) * 3 + j)] ==
                  xs[static_cast<std::size_t>(((n * 16 + c) * 6 + 2 * i) * 5 + 2 * j)]);
    // The fused block against its unfused spelling (PyTorch's): the shortcut padded with 8
    // zero channels on either side, added after the batch norm, then ReLU.
    const et::Tensor<float, 4, D> h = et::relu(composed.bn1(composed.conv1(x)));
    const et::Tensor<float, 4, D> want =
        et::relu(composed.bn2(composed.conv2(h)) + et::pad(sampled, {{{0, 0}, {8, 8}, {0, 0}, {0, 0}}}));
    const auto got = block(x);
    REQUIRE(got.shape() == et::Shape<4>{2, 32, 3, 3});
    std::vector<double> expected;
    for (const float v : want.to_vector()) expected.push_back(v);
    check_all_close(got.to_vector(), expected, 1e-5);
  }
}

/// On the GPU only: unoptimized and sanitized, building AlexNet-S alone takes a minute.
template <class D>
void check_table7_imagenet_networks() {
  SECTION("AlexNet-S: 62,378,344 parameters") {
    auto alex = table7::alexnet_s<float>(D{});
    CHECK(parameter_count(alex) == 62378344);
    CHECK(alex(et::randn<float>(D{}, {2, 3, 224, 224}, 1)).shape() == et::Shape<2>{2, 1000});
  }
  SECTION("ResNet-50: torchvision's 25,557,032 parameters and names; any plane of 32x32 or more") {
    table7::ResNet50<float, D> resnet(D{});
    CHECK(parameter_count(resnet) == 25557032);
    const auto names = defined_names(resnet);
    CHECK(names.size() == 320);  // torchvision's state_dict has 320 entries (161 parameters, 159 buffers)
    for (const char* name : {"conv1.weight", "layer1.0.downsample.0.weight", "layer1.0.downsample.1.running_mean",
                             "layer2.3.conv3.weight", "layer4.2.bn3.num_batches_tracked", "fc.weight"})
      CHECK(has(names, name));
    CHECK(!has(names, "layer1.1.downsample.0.weight"));
    CHECK(every_parameter_learns(resnet, et::randn<float>(D{}, {2, 3, 64, 64}, 3), D{}));
    resnet.eval();  // one image: its last stage's planes are 1x1, which BatchNorm can only normalize in eval mode
    CHECK(resnet(et::randn<float>(D{}, {1, 3, 32, 32}, 2)).shape() == et::Shape<2>{1, 1000});
  }
}

}  // namespace test
