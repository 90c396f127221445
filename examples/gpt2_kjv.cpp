// A small GPT (examples/gpt2.hpp: GPT-2's architecture and Hugging Face's weight names)
// trained on the King James text, which scripts/install-deps writes to data/kjv/kjv.txt, as
// bytes (et::data::ByteTokenizer: vocabulary 256). Every tenth verse is held out. Training
// windows of `context` bytes start at random offsets of the training text; AdamW with GPT-2's
// groups (weight decay 0.1 on the matrices only), betas (0.9, 0.95), gradients clipped to a
// total norm of 1, a linear warm-up then a cosine decay of the learning rate. Prints the
// training loss as it goes and the validation loss at the end, which must beat the unigram
// guess (the entropy of the training text's bytes); samples text from the trained model,
// saves it as safetensors in Hugging Face's naming, reads it back and checks the logits agree.
//
//   gpt2_kjv [--data data/kjv/kjv.txt] [--steps 2000] [--layers 4] [--width 256] [--heads 4]
//            [--context 128] [--batch 32] [--lr 1e-3] [--text N (the first N bytes)]
//            [--save model.safetensors] [--sample 200]
//   gpt2_kjv --hf-check DIR [--layers L --width E --heads H --context T]
//
// --hf-check: DIR holds model.safetensors, a Hugging Face GPT2LMHeadModel of that size
// (vocabulary 256, float, its own random initialization), and expected.safetensors, what
// transformers computed with it (scripts/gpt2-hf-check writes both): the inputs and targets,
// the logits, the mean cross-entropy and every parameter's gradient ("grad." + its name).
// etensor's model loads the weights and must agree: logits and loss to 1e-4, gradients to
// 1e-4 of each one's largest magnitude.
#include <et/nn.hpp>

#include "gpt2.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string data = "data/kjv/kjv.txt", save, hf_check;
  std::int64_t steps = 2000, layers = 4, width = 256, heads = 4, context = 128, batch = 32, text = 0, sample = 200;
  double lr = 1e-3;
};

/// The verses' text (the reference dropped), every tenth verse in `valid`.
struct Text {
  std::string train, valid;
};
Text read_text(const std::string& path, std::int64_t limit) {
  std::ifstream in(path);
  if (!in) throw et::Error("gpt2_kjv: cannot read " + path + " (scripts/install-deps writes it)");
  Text text;
  std::string line;
  for (std::int64_t verse = 0; std::getline(in, line); ++verse) {
    const std::size_t space = line.find(' ');
    const std::string body = (space == std::string::npos ? line : line.substr(space + 1)) + "\n";
    (verse % 10 == 9 ? text.valid : text.train) += body;
    if (limit > 0 && static_cast<std::int64_t>(text.train.size()) >= limit) break;
  }
  return text;
}

/// The entropy (nats) of the bytes of `s`: the loss of always guessing their frequencies.
double unigram_entropy(const std::string& s) {
  std::vector<double> counts(256, 0.0);
  for (const unsigned char c : s) counts[c] += 1;
  double h = 0;
  for (const double c : counts)
    if (c > 0) h -= c / double(s.size()) * std::log(c / double(s.size()));
  return h;
}

/// `batch` windows of context + 1 tokens from random offsets: (inputs, targets) [batch, context].
template <et::Device D>
std::pair<et::Tensor<std::int64_t, 2, D>, et::Tensor<std::int64_t, 2, D>> windows(const std::vector<std::int64_t>& tokens,
                                                                                  std::int64_t batch, std::int64_t context,
                                                                                  std::mt19937_64& rng) {
  std::vector<std::int64_t> x(static_cast<std::size_t>(batch * context)), y(x.size());
  std::uniform_int_distribution<std::size_t> offset(0, tokens.size() - static_cast<std::size_t>(context) - 1);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::size_t at = offset(rng);
    std::copy_n(tokens.begin() + at, context, x.begin() + b * context);
    std::copy_n(tokens.begin() + at + 1, context, y.begin() + b * context);
  }
  return {et::from_vector(et::cpu, x, {batch, context}).to(D{}), et::from_vector(et::cpu, y, {batch, context}).to(D{})};
}

/// A tensor of expected.safetensors as a vector of T (its dtype checked).
template <class T>
std::vector<T> values_of(const et::io::SafeTensorsFile& file, const std::string& name, const char* dtype) {
  const auto found = file.tensors.find(name);
  if (found == file.tensors.end() || found->second.dtype != dtype)
    throw et::Error("gpt2_kjv: the expected values have no " + std::string(dtype) + " tensor \"" + name + "\"");
  std::vector<T> out(found->second.bytes.size() / sizeof(T));
  std::memcpy(out.data(), found->second.bytes.data(), out.size() * sizeof(T));
  return out;
}

/// The largest |got - want| over the largest |want| (1 where all are smaller).
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0, scale = 1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return worst / scale;
}

template <et::Device D>
int hf_check(D dev, const Options& o) {
  const gpt2::Config config{.vocab_size = 256, .n_positions = o.context, .n_embd = o.width, .n_layer = o.layers,
                            .n_head = o.heads};
  gpt2::Model<float, D> model(dev, config, 5);
  et::nn::load(model, o.hf_check + "/model.safetensors");
  const auto expected = et::io::read_safetensors(o.hf_check + "/expected.safetensors");
  const auto shape = expected.tensors.at("input_ids").shape;
  if (shape.size() != 2) throw et::Error("gpt2_kjv: input_ids must be [B, T]");
  const auto tokens = et::from_vector(et::cpu, values_of<std::int64_t>(expected, "input_ids", "I64"), {shape[0], shape[1]});
  const auto targets = et::from_vector(et::cpu, values_of<std::int64_t>(expected, "targets", "I64"), {shape[0], shape[1]});
  const et::Tensor<float, 3, D> logits = model.forward(tokens.to(dev));
  const double logits_error = relative_error(logits.to_vector(), values_of<float>(expected, "logits", "F32"));
  const std::int64_t n = shape[0] * shape[1];
  const auto loss = et::nn::cross_entropy(logits.reshape({n, logits.size(2)}), targets.to(dev).reshape({n}));
  const double loss_error = std::fabs(loss.item() - double(values_of<float>(expected, "loss", "F32").at(0)));
  loss.backward();
  double grad_error = 0;
  std::string worst;
  et::nn::for_each_tensor(model, [&](const std::string& name, const auto& t) {
    using V = std::remove_cvref_t<decltype(t)>;
    if constexpr (std::is_same_v<typename V::value_type, float>) {
      if (!t.requires_grad()) return;
      const double e = relative_error(t.grad().to_vector(), values_of<float>(expected, "grad." + name, "F32"));
      if (e >= grad_error) grad_error = e, worst = name;
    }
  });
  const bool ok = logits_error <= 1e-4 && loss_error <= 1e-4 && grad_error <= 1e-4;
  std::printf("Hugging Face's GPT2LMHeadModel (%lld layers, width %lld, %lld heads) on %s: logits %.2e, loss %.2e, "
              "gradients %.2e (worst: %s) of their scale apart: %s\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.width), static_cast<long long>(o.heads),
              et::device_name<D>.c_str(), logits_error, loss_error, grad_error, worst.c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

template <et::Device D>
int run(D dev, const Text& text, const Options& o) {
  using Tokenizer = et::data::ByteTokenizer;
  const std::vector<std::int64_t> train = Tokenizer::encode(text.train).to_vector(), valid = Tokenizer::encode(text.valid).to_vector();
  if (static_cast<std::int64_t>(std::min(train.size(), valid.size())) <= o.context + 1)
    throw et::Error("gpt2_kjv: the text is shorter than a window of " + std::to_string(o.context + 1) + " bytes");
  const gpt2::Config config{.vocab_size = Tokenizer::vocab_size, .n_positions = o.context, .n_embd = o.width,
                            .n_layer = o.layers, .n_head = o.heads};
  gpt2::Model<float, D> model(dev, config, 1);
  std::int64_t count = 0;
  for (const auto& p : model.parameters()) count += p.numel();
  std::printf("GPT on the King James text on %s: %zu training and %zu validation bytes, %lld layers, width %lld, "
              "%lld heads, context %lld, batches of %lld, %lld steps, %.2fM parameters\n",
              et::device_name<D>.c_str(), train.size(), valid.size(), static_cast<long long>(o.layers),
              static_cast<long long>(o.width), static_cast<long long>(o.heads), static_cast<long long>(o.context),
              static_cast<long long>(o.batch), static_cast<long long>(o.steps), double(count) / 1e6);
  // [guide:gpt2-train]
  et::optim::AdamW<float, D> opt(model.parameter_groups(0.1), {.lr = o.lr, .betas = {0.9, 0.95}});
  std::mt19937_64 rng(7);
  const std::int64_t warmup = std::max<std::int64_t>(1, o.steps / 20);
  const auto start = std::chrono::steady_clock::now();
  double smoothed = 0;
  for (std::int64_t step = 0; step < o.steps; ++step) {
    const double progress = double(step - warmup) / double(std::max<std::int64_t>(1, o.steps - warmup));
    opt.options().lr = step < warmup ? o.lr * double(step + 1) / double(warmup)
                                     : o.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * std::min(1.0, progress))));
    const auto [x, y] = windows<D>(train, o.batch, o.context, rng);
    opt.zero_grad(true);
    const auto loss = model.loss(x, y);
    loss.backward();
    et::nn::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    if (step % 50 == 0 || step + 1 == o.steps) {
      const double value = loss.item();
      smoothed = step == 0 ? value : 0.9 * smoothed + 0.1 * value;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %5lld  loss %.4f  lr %.2e  %8.0f tokens/s\n", static_cast<long long>(step), value,
                  opt.options().lr, double((step + 1) * o.batch * o.context) / seconds);
    }
  }
  // [guide:end]
  double valid_loss = 0;
  {
    et::NoGradGuard no_grad;
    std::mt19937_64 valid_rng(11);
    constexpr int batches = 4;
    for (int k = 0; k < batches; ++k) {
      const auto [x, y] = windows<D>(valid, o.batch, o.context, valid_rng);
      valid_loss += model.loss(x, y).item() / batches;
    }
  }
  const double guess = unigram_entropy(text.train);
  const bool ok = std::isfinite(valid_loss) && valid_loss < guess;
  std::printf("validation loss %.4f %s %.4f (the bytes' unigram entropy): %s\n", valid_loss, ok ? "<" : ">=", guess,
              ok ? "ok" : "FAILED");
  // Sampling: the most likely next byte after the prompt, o.sample times (greedy).
  if (o.sample > 0) {
    et::NoGradGuard no_grad;
    std::vector<std::int64_t> context = Tokenizer::encode("And God said, ").to_vector();
    for (std::int64_t k = 0; k < o.sample; ++k) {
      const std::int64_t t = std::min<std::int64_t>(static_cast<std::int64_t>(context.size()), o.context);
      const std::vector<std::int64_t> window(context.end() - t, context.end());
      const auto logits = model.forward(et::from_vector(et::cpu, window, {1, t}).to(dev));
      const auto last = et::eval(logits.slice(1, t - 1, t).reshape({Tokenizer::vocab_size})).to_vector();
      context.push_back(std::max_element(last.begin(), last.end()) - last.begin());
    }
    std::printf("sample: %s\n", Tokenizer::decode(et::from_vector(et::cpu, context, {static_cast<std::int64_t>(context.size())})).c_str());
  }
  // A sequence longer than the positional table is refused with a clear error.
  bool refused = false;
  try {
    const std::vector<std::int64_t> long_window(static_cast<std::size_t>(o.context + 1), 0);
    model.forward(et::from_vector(et::cpu, long_window, {1, o.context + 1}).to(dev));
  } catch (const et::ShapeError& e) {
    refused = std::string(e.what()).find("longer than the") != std::string::npos;
  }
  std::printf("a window of %lld tokens (the table has %lld positions): %s\n", static_cast<long long>(o.context + 1),
              static_cast<long long>(o.context), refused ? "refused, as it must be" : "NOT REFUSED");
  // Saved in Hugging Face's names, read back into a new model: the same logits.
  const std::string path = o.save.empty() ? "gpt2_kjv.safetensors" : o.save;
  et::nn::save(model, path);
  gpt2::Model<float, D> loaded(dev, config, 99);
  et::nn::load(loaded, path);
  {
    et::NoGradGuard no_grad;
    const auto [x, y] = windows<D>(valid, 2, o.context, rng);
    const bool same = model.forward(x).to_vector() == loaded.forward(x).to_vector();
    std::printf("saved to %s and read back: the logits %s\n", path.c_str(), same ? "agree" : "DIFFER");
    if (o.save.empty()) std::remove(path.c_str());
    return ok && same && refused ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool ok = true;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    if (i + 1 >= argc) ok = false;
    else if (key == "--data") o.data = value;
    else if (key == "--save") o.save = value;
    else if (key == "--hf-check") o.hf_check = value;
    else if (key == "--steps") o.steps = std::atoll(value.c_str());
    else if (key == "--layers") o.layers = std::atoll(value.c_str());
    else if (key == "--width") o.width = std::atoll(value.c_str());
    else if (key == "--heads") o.heads = std::atoll(value.c_str());
    else if (key == "--context") o.context = std::atoll(value.c_str());
    else if (key == "--batch") o.batch = std::atoll(value.c_str());
    else if (key == "--text") o.text = std::atoll(value.c_str());
    else if (key == "--sample") o.sample = std::atoll(value.c_str());
    else if (key == "--lr") o.lr = std::atof(value.c_str());
    else ok = false;
  }
  if (!ok || o.steps < 1 || o.layers < 0 || o.width < 1 || o.heads < 1 || o.width % o.heads != 0 || o.context < 1 ||
      o.batch < 1 || o.text < 0 || o.sample < 0 || !(o.lr > 0)) {
    std::fprintf(stderr,
                 "usage: gpt2_kjv [--data data/kjv/kjv.txt] [--steps >= 1] [--layers >= 0] [--width >= 1] [--heads "
                 "(dividing the width)] [--context >= 1] [--batch >= 1] [--lr > 0] [--text >= 0] [--save path] "
                 "[--sample >= 0] [--hf-check DIR]\n");
    return 2;
  }
  if (!o.hf_check.empty()) return et::try_gpu([&](auto dev) { return hf_check(dev, o); });
  const Text text = read_text(o.data, o.text);
  return et::try_gpu([&](auto dev) { return run(dev, text, o); });
}
