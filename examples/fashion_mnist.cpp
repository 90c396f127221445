// Two networks of Shi et al.'s Table 7 trained on real data: Fashion-MNIST (60000 training
// and 10000 test images of clothes, 28x28 grey levels; scripts/install-deps unpacks
// Debian's dataset-fashion-mnist into data/fashion-mnist). The IDX files are read with
// et::data::read_idx_images/labels; the networks are examples/table7.hpp's:
//
//   fcn_r     784 -> 2048 -> 4096 -> 1024 -> 10, sigmoid, on the images as rows; Adam
//   resnet56  He et al.'s CIFAR ResNet on the images padded to 32x32 and repeated over three
//             channels (no CIFAR-10 is packaged); SGD with momentum 0.9, weight decay 1e-4
//
// trained on shuffled batches from et::data::DataLoader with the loop of classifier.hpp. One
// line per epoch; the loss and accuracy curves go to a PNG when a path is given. A full run
// must reach 88% (FCN-R) or 90% (ResNet-56) test accuracy; a smaller one (fewer images,
// FCN-R's widths divided) 70% (FCN-R), or for ResNet-56 (a few steps in CI) finite losses.
//
// --amp bf16 or f16 trains in mixed precision on a GPU (classifier.hpp: et::amp::Autocast,
// and GradScaler for f16): the accuracy should be that of float training within half a point.
//
//   fashion_mnist [--data data/fashion-mnist] [--net fcn_r|resnet56] [--epochs 30] [--train 60000]
//                 [--test 10000] [--batch 256] [--width-divisor 1] [--amp fp32|bf16|f16] [--png curves.png]
#include <et/nn.hpp>

#include "classifier.hpp"
#include "plot_png.hpp"
#include "table7.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// [guide:fashion-data]
/// Images as float rows standardized with the training set's mean and deviation of a pixel
/// (0.2860 and 0.3530), labels as int64: [n, 784] and [n] host tensors.
struct Split {
  et::Tensor<float, 2, et::Cpu> images;
  et::Tensor<std::int64_t, 1, et::Cpu> labels;
};
Split read_split(const std::string& folder, const std::string& prefix, std::int64_t count) {
  const et::Tensor<std::uint8_t, 3, et::Cpu> pixels = et::data::read_idx_images(folder + "/" + prefix + "-images-idx3-ubyte");
  const et::Tensor<std::int64_t, 1, et::Cpu> labels = et::data::read_idx_labels(folder + "/" + prefix + "-labels-idx1-ubyte");
  if (labels.size(0) != pixels.size(0))
    throw et::Error("fashion_mnist: " + std::to_string(pixels.size(0)) + " images but " + std::to_string(labels.size(0)) + " labels");
  const std::int64_t n = std::min(count, pixels.size(0));
  const auto first = pixels.slice(0, 0, n).reshape(std::array<std::int64_t, 2>{n, 28 * 28});
  return {et::eval((et::cast<float>(first) / 255.0f - 0.2860f) / 0.3530f), labels.slice(0, 0, n).contiguous()};
}
// [guide:end]

/// The images [n, 784] as [n, 3, 32, 32]: padded by two zeros on each side (the
/// standardized value of a black pixel, -0.2860 / 0.3530, would be the image's own
/// background; zero is the data's mean) and repeated over three channels.
et::Tensor<float, 4, et::Cpu> as_cifar(const et::Tensor<float, 2, et::Cpu>& rows) {
  const std::int64_t n = rows.size(0);
  const auto planes = et::pad(rows.reshape(std::array<std::int64_t, 4>{n, 1, 28, 28}), {{{0, 0}, {0, 0}, {2, 2}, {2, 2}}});
  auto out = et::Tensor<float, 4, et::Cpu>::allocate(et::Shape<4>{n, 3, 32, 32});
  out.copy_(planes);  // broadcast over the channels
  return out;
}

struct Options {
  std::string data = "data/fashion-mnist", net = "fcn_r", png, amp = "fp32";
  int epochs = 30;
  std::int64_t train = 60000, test = 10000, batch = 256, divisor = 1;
};

template <et::Device D>
int run(D dev, const Split& train, const Split& test, const Options& o) {
  const bool resnet = o.net == "resnet56";
  const bool full = o.divisor == 1 && train.labels.size(0) == 60000 && test.labels.size(0) == 10000;
  std::printf("%s on Fashion-MNIST on %s (%s): %lld training and %lld test images, batches of %lld, %d epochs%s\n",
              resnet ? "ResNet-56" : "FCN-R", et::device_name<D>.c_str(), o.amp.c_str(), static_cast<long long>(train.labels.size(0)),
              static_cast<long long>(test.labels.size(0)), static_cast<long long>(o.batch), o.epochs,
              o.divisor > 1 ? (", hidden widths / " + std::to_string(o.divisor)).c_str() : "");
  const et::data::LoaderOptions batches{.batch_size = o.batch, .shuffle = true, .seed = 3};
  // train<L>(...) in the precision --amp names: on a GPU (the CPU backend has no 16-bit
  // products to gain from, and leaving them out keeps this file's CPU build small).
  const auto train_in = [&](auto&&... args) {
    if constexpr (D::is_cuda) {
      if (o.amp == "bf16") return example::train<et::bfloat16>(args...);
      if (o.amp == "f16") return example::train<et::half>(args...);
    } else if (o.amp != "fp32") {
      throw et::Error("fashion_mnist: --amp " + o.amp + " trains on a GPU only (none was found)");
    }
    return example::train(args...);
  };
  example::Curves curves;
  if (resnet) {
    table7::ResNet56<float, D> model(dev);
    et::optim::SGD opt(model.parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
    et::data::DataLoader loader(et::data::TensorDataset(as_cifar(train.images), train.labels), dev, batches);
    curves = train_in("resnet-56", model, opt, loader, as_cifar(test.images).to(dev), test.labels.to(dev), o.epochs);
  } else {
    auto model = table7::fcn_r<float>(dev, 1, o.divisor);
    // [guide:fashion-train]
    et::data::DataLoader loader(et::data::TensorDataset(train.images, train.labels), dev, batches);
    et::optim::Adam opt(model.parameters(), {.lr = 1e-3});
    curves = train_in("fcn-r", model, opt, loader, test.images.to(dev), test.labels.to(dev), o.epochs);
    // [guide:end]
  }
  const std::string png = o.png;
  if (!png.empty()) {
    example::Chart chart(720, 320);
    chart.panel(0, 0.0, 2.5);  // left: training loss
    chart.panel(1, 0.5, 1.0);  // right: test accuracy
    chart.line(0, curves.loss, example::Chart::blue);
    chart.line(1, curves.accuracy, example::Chart::orange);
    chart.write(png);
    std::printf("curves written to %s (left: training loss 0..2.5, right: test accuracy 0.5..1)\n", png.c_str());
  }
  if (resnet && !full) {
    const bool finite = std::all_of(curves.loss.begin(), curves.loss.end(), [](double l) { return std::isfinite(l); });
    std::printf("losses %s: %s\n", finite ? "finite" : "not finite", finite ? "ok" : "FAILED");
    return finite ? 0 : 1;
  }
  const double needed = resnet ? 0.90 : full ? 0.88 : 0.70;
  const bool ok = curves.accuracy.back() >= needed;
  std::printf("test accuracy %.4f %s %.2f: %s\n", curves.accuracy.back(), ok ? ">=" : "<", needed, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool ok = true;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (i + 1 >= argc) ok = false;
    else if (key == "--data") o.data = value;
    else if (key == "--net") o.net = value;
    else if (key == "--png") o.png = value;
    else if (key == "--amp") o.amp = value;
    else if (key == "--epochs") o.epochs = std::atoi(value.c_str());
    else if (key == "--train") o.train = std::atoll(value.c_str());
    else if (key == "--test") o.test = std::atoll(value.c_str());
    else if (key == "--batch") o.batch = std::atoll(value.c_str());
    else if (key == "--width-divisor") o.divisor = std::atoll(value.c_str());
    else ok = false;
  }
  if (!ok || (o.net != "fcn_r" && o.net != "resnet56") || o.epochs < 1 || o.train < 1 || o.test < 1 || o.batch < 1 ||
      o.divisor < 1 || o.divisor > 1024 || (o.amp != "fp32" && o.amp != "bf16" && o.amp != "f16")) {
    std::fprintf(stderr,
                 "usage: fashion_mnist [--data data/fashion-mnist] [--net fcn_r|resnet56] [--epochs >= 1] "
                 "[--train >= 1] [--test >= 1] [--batch >= 1] [--width-divisor 1..1024] [--amp fp32|bf16|f16] "
                 "[--png curves.png]\n");
    return 2;
  }
  const Split train = read_split(o.data, "train", o.train);
  const Split test = read_split(o.data, "t10k", o.test);
  return et::try_gpu([&](auto dev) { return run(dev, train, test, o); });
}
