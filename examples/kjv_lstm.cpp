// Table 7's LSTM (examples/table7.hpp: Embedding, two LSTM layers, a Linear layer over the
// vocabulary) trained as a word-level language model on real text: the King James Bible,
// which scripts/install-deps writes to data/kjv/kjv.txt from Debian's bible-kjv packages
// (31102 verses, one a line, "Ge1:1 In the beginning God created the heaven and the earth.").
//
// The text is tokenized as the Penn Treebank's language-modelling copy is: the verse's
// reference dropped, lower case, words of letters (an apostrophe inside a word kept), an
// <eos> after every verse, the most frequent words kept (10000 with <unk> and <eos>, ties
// alphabetical) and <unk> for the rest. Every tenth verse is held out for validation. The
// token stream is cut into 128 columns and read 32 steps at a time; the LSTM's state
// carries from one batch to the next, detached (truncated back-propagation through time).
// Cross-entropy over every step, gradients clipped to a total norm of 5, SGD with lr 1,
// halved after every epoch from the fourth (Zaremba et al.'s small PTB model). One line per
// epoch with the validation perplexity, which a full run must bring below 200; curves to a
// PNG when a path is given. A small run (CI) must beat the uniform guess (perplexity below
// the vocabulary's size).
//
//   kjv_lstm [--data data/kjv/kjv.txt] [--epochs 6] [--vocabulary 10000] [--width 256]
//            [--batch 128] [--steps 32] [--tokens N (the first verses, to N training words)]
//            [--png curves.png]
#include <et/nn.hpp>

#include "plot_png.hpp"
#include "table7.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// [guide:kjv-tokens]
/// The verses' words, lower case, each verse closed by "<eos>": every tenth verse in
/// `valid`, the others in `train` (only the first verses that give `limit` training words,
/// when a limit is given).
struct Words {
  std::vector<std::string> train, valid;
};
Words read_words(const std::string& path, std::int64_t limit = 0) {
  std::ifstream in(path);
  if (!in) throw et::Error("kjv_lstm: cannot read " + path + " (scripts/install-deps writes it)");
  Words words;
  std::string line;
  for (std::int64_t verse = 0; std::getline(in, line); ++verse) {
    if (limit > 0 && static_cast<std::int64_t>(words.train.size()) >= limit && verse % 10 == 0) break;
    auto& into = verse % 10 == 9 ? words.valid : words.train;
    std::string word;
    auto flush = [&] {
      while (!word.empty() && word.back() == '\'') word.pop_back();  // a closing quote, not a word's
      if (!word.empty()) into.push_back(word);
      word.clear();
    };
    for (const char c : line.substr(std::min(line.find(' '), line.size()))) {  // after the reference
      if (std::isalpha(static_cast<unsigned char>(c))) word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (c == '\'' && !word.empty()) word += c;
      else flush();
    }
    flush();
    into.push_back("<eos>");
  }
  if (words.train.empty() || words.valid.empty()) throw et::Error("kjv_lstm: " + path + " holds too few verses");
  return words;
}

/// Ids of the `size` - 1 most frequent training words (ties alphabetical) and <unk> (id 0).
std::unordered_map<std::string, std::int64_t> vocabulary_of(const std::vector<std::string>& words, std::int64_t size) {
  std::map<std::string, std::int64_t> counts;
  for (const auto& w : words) ++counts[w];
  std::vector<std::pair<std::int64_t, std::string>> ranked;
  for (const auto& [w, n] : counts) ranked.emplace_back(-n, w);
  std::sort(ranked.begin(), ranked.end());
  std::unordered_map<std::string, std::int64_t> ids{{"<unk>", 0}};
  for (const auto& [n, w] : ranked) {
    if (static_cast<std::int64_t>(ids.size()) >= size) break;
    ids.emplace(w, static_cast<std::int64_t>(ids.size()));
  }
  return ids;
}

/// The ids of `words` cut into `columns` columns: [length, columns], column j holding the
/// j-th stretch of the stream (the tail that does not fill a row is dropped).
et::Tensor<std::int64_t, 2, et::Cpu> columns_of(const std::vector<std::string>& words,
                                                const std::unordered_map<std::string, std::int64_t>& ids,
                                                std::int64_t columns) {
  const std::int64_t length = static_cast<std::int64_t>(words.size()) / columns;
  std::vector<std::int64_t> values(static_cast<std::size_t>(length * columns));
  for (std::int64_t j = 0; j < columns; ++j)
    for (std::int64_t t = 0; t < length; ++t) {
      const auto found = ids.find(words[static_cast<std::size_t>(j * length + t)]);
      values[static_cast<std::size_t>(t * columns + j)] = found == ids.end() ? 0 : found->second;
    }
  return et::from_vector(et::cpu, values, {length, columns});
}
// [guide:end]

struct Options {
  std::string data = "data/kjv/kjv.txt", png;
  int epochs = 6;
  std::int64_t vocabulary = 10000, width = 256, batch = 128, steps = 32, tokens = 0;
};

template <et::Device D>
int run(D dev, const Words& words, const Options& o) {
  const auto ids = vocabulary_of(words.train, o.vocabulary);
  const auto train = columns_of(words.train, ids, o.batch).to(dev);
  const auto valid = columns_of(words.valid, ids, o.batch).to(dev);
  if (train.size(0) < 2 || valid.size(0) < 2)
    throw et::Error("kjv_lstm: too few tokens for " + std::to_string(o.batch) + " columns of two or more");
  const auto V = static_cast<std::int64_t>(ids.size());
  std::printf("LSTM language model on the King James text on %s: %lld training and %lld validation tokens, "
              "vocabulary %lld, width %lld, batches of %lld x %lld steps, %d epochs\n",
              et::device_name<D>.c_str(), static_cast<long long>(train.numel()), static_cast<long long>(valid.numel()),
              static_cast<long long>(V), static_cast<long long>(o.width), static_cast<long long>(o.batch),
              static_cast<long long>(o.steps), o.epochs);
  table7::LstmLm<float, D> model(dev, V, o.width, 1);
  et::optim::SGD opt(model.parameters(), {.lr = 1.0});
  // [guide:kjv-train]
  // The mean cross-entropy of predicting each next token of `data` [length, columns], 32
  // steps at a time, the state carried across batches; training takes a step per batch.
  auto pass = [&](const et::Tensor<std::int64_t, 2, D>& data, bool training) {
    const std::int64_t layers = 2, columns = data.size(1);
    auto h = et::zeros<float>(dev, {layers, columns, o.width}), c = et::zeros<float>(dev, {layers, columns, o.width});
    auto total = et::zeros<float>(dev, et::Shape<0>{});
    std::int64_t batches = 0;
    for (std::int64_t t = 0; t + 1 < data.size(0); t += o.steps, ++batches) {
      const std::int64_t n = std::min(o.steps, data.size(0) - 1 - t);
      const auto x = data.slice(0, t, t + n);
      const auto next = data.slice(0, t + 1, t + 1 + n).reshape({n * columns});
      auto [y, h_out, c_out] = model.lstm(model.embedding(x), h, c);
      const auto loss = et::nn::cross_entropy(model.decoder(y.reshape({n * columns, o.width})), next);
      if (training) {
        opt.zero_grad();
        loss.backward();
        et::nn::clip_grad_norm_(model.parameters(), 5.0);
        opt.step();
      }
      h = h_out.detach();  // the state goes on; its gradient stops at the batch's edge
      c = c_out.detach();
      total += loss.detach();
    }
    return total.item() / double(batches);
  };
  // [guide:end]
  std::vector<double> train_loss, valid_perplexity;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    if (epoch >= 5) opt.options().lr /= 2;
    const auto start = std::chrono::steady_clock::now();
    model.train();
    const double loss = pass(train, true);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double valid_loss = 0;
    {
      et::NoGradGuard no_grad;
      model.eval();
      valid_loss = pass(valid, false);
    }
    train_loss.push_back(loss);
    valid_perplexity.push_back(std::exp(valid_loss));
    std::printf("lstm epoch %2d  loss %.4f  validation perplexity %8.2f  %9.0f tokens/s\n", epoch, loss,
                valid_perplexity.back(), double(train.numel()) / seconds);
  }
  if (!o.png.empty()) {
    example::Chart chart(720, 320);
    chart.panel(0, 0.0, 8.0);    // left: training loss
    chart.panel(1, 0.0, 600.0);  // right: validation perplexity
    chart.line(0, train_loss, example::Chart::blue);
    chart.line(1, valid_perplexity, example::Chart::orange);
    chart.write(o.png);
    std::printf("curves written to %s (left: training loss 0..8, right: validation perplexity 0..600)\n", o.png.c_str());
  }
  const bool full = o.vocabulary == 10000 && o.width == 256 && o.tokens == 0;
  const double needed = full ? 200.0 : double(V);
  const double last = valid_perplexity.back();
  const bool ok = std::isfinite(last) && last < needed;
  std::printf("validation perplexity %.2f %s %.0f: %s\n", last, ok ? "<" : ">=", needed, ok ? "ok" : "FAILED");
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
    else if (key == "--png") o.png = value;
    else if (key == "--epochs") o.epochs = std::atoi(value.c_str());
    else if (key == "--vocabulary") o.vocabulary = std::atoll(value.c_str());
    else if (key == "--width") o.width = std::atoll(value.c_str());
    else if (key == "--batch") o.batch = std::atoll(value.c_str());
    else if (key == "--steps") o.steps = std::atoll(value.c_str());
    else if (key == "--tokens") o.tokens = std::atoll(value.c_str());
    else ok = false;
  }
  if (!ok || o.epochs < 1 || o.vocabulary < 2 || o.width < 1 || o.batch < 1 || o.steps < 1 || o.tokens < 0) {
    std::fprintf(stderr,
                 "usage: kjv_lstm [--data data/kjv/kjv.txt] [--epochs >= 1] [--vocabulary >= 2] [--width >= 1] "
                 "[--batch >= 1] [--steps >= 1] [--tokens >= 0] [--png curves.png]\n");
    return 2;
  }
  const Words words = read_words(o.data, o.tokens);
  return et::try_gpu([&](auto dev) { return run(dev, words, o); });
}
