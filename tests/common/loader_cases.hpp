// The data loader (et/data/loader.hpp), shared by the CPU and GPU tests: batch contents and
// order against the dataset, seeded shuffles (every sample once per epoch, the same order
// on every device), drop_last, the progress hook, datasets written by a function, and bad
// arguments.
#pragma once

#include <et/data/loader.hpp>
#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace test {

/// The labels of every batch of one epoch, in order, and checks that each batch's rows
/// are the dataset's rows of those labels (row i of x holds 10 i, 10 i + 1, 10 i + 2).
template <class Loader>
std::vector<std::int64_t> epoch_labels(Loader& loader, std::vector<std::int64_t>* sizes = nullptr) {
  std::vector<std::int64_t> labels;
  for (const auto& [x, y] : loader) {
    const auto xs = x.to_vector();
    const auto ys = y.to_vector();
    REQUIRE(xs.size() == ys.size() * 3);
    for (std::size_t r = 0; r < ys.size(); ++r)
      for (std::size_t j = 0; j < 3; ++j) CHECK(xs[r * 3 + j] == float(10 * ys[r] + std::int64_t(j)));
    labels.insert(labels.end(), ys.begin(), ys.end());
    if (sizes) sizes->push_back(std::int64_t(ys.size()));
  }
  return labels;
}

inline et::data::TensorDataset<et::Tensor<float, 2, et::Cpu>, et::Tensor<std::int64_t, 1, et::Cpu>> numbered(
    std::int64_t n) {
  std::vector<float> x(std::size_t(n * 3));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(10 * (i / 3) + i % 3);
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  std::iota(y.begin(), y.end(), 0);
  return et::data::TensorDataset(et::from_vector(et::cpu, x, {n, 3}), et::from_vector(et::cpu, y, {n}));
}

template <class D>
void check_loader() {
  // In order: 10 samples in batches of 4 (the last of 2), or 2 batches with drop_last.
  et::data::DataLoader in_order(numbered(10), D{}, {.batch_size = 4});
  CHECK(in_order.size() == 3);
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> all(10);
  std::iota(all.begin(), all.end(), 0);
  CHECK(epoch_labels(in_order, &sizes) == all);
  CHECK(sizes == std::vector<std::int64_t>{4, 4, 2});
  CHECK(epoch_labels(in_order) == all);  // a second epoch
  CHECK(in_order.epochs() == 2);
  et::data::DataLoader dropping(numbered(10), D{}, {.batch_size = 4, .drop_last = true});
  CHECK(dropping.size() == 2);
  CHECK(epoch_labels(dropping).size() == 8);

  // Shuffled: every sample once per epoch, a new order each epoch, one order per seed.
  et::data::DataLoader shuffled(numbered(37), D{}, {.batch_size = 5, .shuffle = true, .seed = 3});
  const auto first = epoch_labels(shuffled), second = epoch_labels(shuffled);
  for (const auto& epoch : {first, second}) {
    auto sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> expected(37);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(sorted == expected);
  }
  CHECK(first != second);
  et::data::DataLoader same_seed_on_cpu(numbered(37), et::cpu, {.batch_size = 5, .shuffle = true, .seed = 3});
  CHECK(epoch_labels(same_seed_on_cpu) == first);
  et::data::DataLoader other_seed(numbered(37), D{}, {.batch_size = 5, .shuffle = true, .seed = 4});
  CHECK(epoch_labels(other_seed) != first);

  // A batch stays valid after the loop moved on (each is its own tensors).
  et::data::DataLoader held(numbered(12), D{}, {.batch_size = 3});
  std::vector<et::Tensor<std::int64_t, 1, D>> kept;
  for (const auto& [x, y] : held) kept.push_back(y);
  REQUIRE(kept.size() == 4);
  for (std::int64_t b = 0; b < 4; ++b) CHECK(kept[std::size_t(b)].to_vector() == std::vector<std::int64_t>{3 * b, 3 * b + 1, 3 * b + 2});

  // The progress hook: once per batch, cumulative.
  std::vector<et::data::Progress> seen;
  in_order.on_progress([&](const et::data::Progress& p) { seen.push_back(p); });
  epoch_labels(in_order);
  REQUIRE(seen.size() == 3);
  CHECK((seen[2].epoch == 2 && seen[2].batch == 3 && seen[2].batches == 3 && seen[2].samples == 10));
  CHECK(seen[0].samples == 4);
  CHECK(seen[2].seconds >= seen[0].seconds);

  // A dataset written by a function: sample i is ([i, -i], i % 3).
  auto generated = et::data::from_function(
      7,
      [](std::int64_t i, std::span<double> features, std::span<std::int64_t> label) {
        features[0] = double(i);
        features[1] = -double(i);
        label[0] = i % 3;
      },
      et::data::sample<double>({2}), et::data::sample<std::int64_t>());
  et::data::DataLoader from_function(generated, D{}, {.batch_size = 4});
  std::vector<double> features;
  std::vector<std::int64_t> labels;
  for (const auto& [x, y] : from_function) {
    CHECK(x.size(1) == 2);
    for (const double v : x.to_vector()) features.push_back(v);
    for (const auto v : y.to_vector()) labels.push_back(v);
  }
  CHECK(features == std::vector<double>{0, -0.0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6});
  CHECK(labels == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0});

  // One batch ahead: while the loop's body works on batch b, batch b + 1 is gathered
  // already (on a GPU, and its copy queued on the loader's copy stream).
  std::int64_t gathered = 0;
  auto counting = et::data::from_function(
      10,
      [&gathered](std::int64_t i, std::span<float> features, std::span<std::int64_t> label) {
        ++gathered;
        features[0] = float(i);
        label[0] = i;
      },
      et::data::sample<float>({1}), et::data::sample<std::int64_t>());
  et::data::DataLoader ahead(counting, D{}, {.batch_size = 4});
  std::vector<std::int64_t> gathered_in_body;
  for (const auto& [x, y] : ahead) {
    gathered_in_body.push_back(gathered);
    CHECK(y.to_vector().front() == 4 * std::int64_t(gathered_in_body.size() - 1));
  }
  CHECK(gathered_in_body == std::vector<std::int64_t>{8, 10, 10});

  // Edge cases and bad arguments.
  et::data::DataLoader empty(numbered(0), D{}, {.batch_size = 4});
  CHECK(empty.size() == 0);
  CHECK(epoch_labels(empty).empty());
  CHECK_THROWS_AS(et::data::DataLoader(numbered(4), D{}, {.batch_size = 0}), et::Error);
  et::data::DataLoader whole(numbered(3), D{}, {.batch_size = std::numeric_limits<std::int64_t>::max()});
  CHECK(whole.size() == 1);  // one batch of everything, not 0 after an overflow
  CHECK(epoch_labels(whole) == std::vector<std::int64_t>{0, 1, 2});
  et::data::DataLoader none(numbered(3), D{},
                            {.batch_size = std::numeric_limits<std::int64_t>::max(), .drop_last = true});
  CHECK(none.size() == 0);
  CHECK_THROWS_AS(et::data::TensorDataset(et::zeros<float>(et::cpu, {3, 2}), et::zeros<float>(et::cpu, {4})),
                  et::ShapeError);
}

}  // namespace test
