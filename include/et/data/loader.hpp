// Mini-batches for training (namespace et::data): a dataset of host tensors (or of a
// function that writes one sample), shuffled with a seed, assembled in pinned host memory
// and copied to the device without blocking on a copy stream of the loader's own, one batch
// ahead: while the model trains on batch b, batch b + 1 is gathered on the host and copied.
//
//   et::data::TensorDataset data(images, labels);        // Cpu tensors, samples along axis 0
//   et::data::DataLoader loader(data, et::cuda<0>, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const auto& [x, y] : loader) { ... }           // Tensor<float, 2, Cuda<0>>, Tensor<int64_t, 1, Cuda<0>>
//
// A batch's tensors are ready for the stream that is current when the batch is handed out
// (that stream waits for the copy's event; the host does not). Each epoch draws a new
// order from (seed, epoch); the same seed gives the same batches on every device.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "et/ops/random.hpp"
#include "et/runtime/error.hpp"
#include "et/runtime/stream.hpp"
#include "et/tensor.hpp"

namespace et::data {

namespace detail {

/// Row `row` of a host tensor whose first axis is the sample, as a span.
template <class T, int R, class D>
std::span<T> sample_row(const Tensor<T, R, D>& t, std::int64_t row) {
  const std::int64_t per_sample = t.size(0) == 0 ? 0 : t.numel() / t.size(0);
  return std::span<T>(t.data() + row * per_sample, std::size_t(per_sample));
}

}  // namespace detail

struct LoaderOptions {
  std::int64_t batch_size = 1;
  bool shuffle = false;    ///< a new order each epoch, from (seed, epoch)
  std::uint64_t seed = 0;
  bool drop_last = false;  ///< leave out a last batch smaller than batch_size
};

/// Where an epoch stands: what the progress hook receives after each batch.
struct Progress {
  std::int64_t epoch = 0;    ///< from 0
  std::int64_t batch = 0;    ///< batches done in this epoch
  std::int64_t batches = 0;  ///< batches per epoch
  std::int64_t samples = 0;  ///< samples done in this epoch
  double seconds = 0;        ///< since the epoch began
  double samples_per_second() const { return seconds > 0 ? double(samples) / seconds : 0.0; }
};

/// Samples along the first axis of host tensors: sample i of TensorDataset(x, y) is
/// (x[i], y[i]). The tensors are made contiguous once; all need the same first extent.
template <class... Ts>
class TensorDataset {
  static_assert(sizeof...(Ts) > 0, "et: TensorDataset needs at least one tensor");
  static_assert(((is_tensor_v<Ts> && std::is_same_v<typename Ts::device_type, Cpu> && Ts::rank >= 1) && ...),
                "et: TensorDataset holds Cpu tensors of rank >= 1 (samples along axis 0); the loader copies batches to the device");

 public:
  template <class D>
  using Batch = std::tuple<Tensor<typename Ts::value_type, Ts::rank, D>...>;

  explicit TensorDataset(const Ts&... tensors) : tensors_(tensors.contiguous()...) {
    const std::int64_t n = std::get<0>(tensors_).size(0);
    std::apply([&](const auto&... t) {
      if (((t.size(0) != n) || ...))
        throw ShapeError("et: TensorDataset: the tensors hold different numbers of samples (first extents" +
                         ((" " + std::to_string(t.size(0))) + ...) + ")");
    }, tensors_);
  }

  std::int64_t size() const { return std::get<0>(tensors_).size(0); }

  /// Empty tensors of `rows` samples each, on device D (the batch's shapes).
  template <class D>
  Batch<D> allocate(std::int64_t rows) const {
    return std::apply([&](const auto&... t) { return Batch<D>{batch_like<D>(t, rows)...}; }, tensors_);
  }

  /// Writes sample `sample` into row `row` of each tensor of `out` (host memory).
  template <class D>
  void fill(std::int64_t sample, std::int64_t row, const Batch<D>& out) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (copy_row(std::get<I>(tensors_), sample, std::get<I>(out), row), ...);
    }(std::index_sequence_for<Ts...>{});
  }

 private:
  template <class D, class T, int R>
  static Tensor<T, R, D> batch_like(const Tensor<T, R, Cpu>& t, std::int64_t rows) {
    Shape<R> shape = t.shape();
    shape[0] = rows;
    return Tensor<T, R, D>::allocate(shape);
  }
  template <class T, int R, class D>
  static void copy_row(const Tensor<T, R, Cpu>& from, std::int64_t sample, const Tensor<T, R, D>& to, std::int64_t row) {
    const std::span<T> source = detail::sample_row(from, sample);
    std::memcpy(detail::sample_row(to, row).data(), source.data(), source.size_bytes());
  }

  std::tuple<Ts...> tensors_;
};

/// The shape of one sample of a FunctionDataset: et::data::sample<float>({8, 8}), or
/// et::data::sample<std::int64_t>() for a scalar.
template <class T, int R>
struct SampleSpec {
  using value_type = T;
  static constexpr int rank = R;
  Shape<R> shape;
};
template <class T, std::size_t R>
SampleSpec<T, int(R)> sample(const std::int64_t (&shape)[R]) {
  SampleSpec<T, int(R)> out;
  for (std::size_t i = 0; i < R; ++i) out.shape[i] = shape[i];
  return out;
}
template <class T>
SampleSpec<T, 0> sample() {
  return {};
}

/// Samples that a function writes: from_function(n, f, sample<float>({64}), sample<std::int64_t>())
/// has n samples of a [64] float tensor and an int64 scalar, and f(i, features, label) writes
/// sample i through a std::span<float> of 64 elements and a std::span<std::int64_t> of one.
template <class F, class... Specs>
class FunctionDataset {
 public:
  template <class D>
  using Batch = std::tuple<Tensor<typename Specs::value_type, Specs::rank + 1, D>...>;

  FunctionDataset(std::int64_t n, F f, Specs... specs) : n_(n), f_(std::move(f)), specs_(specs...) {
    if (n < 0) throw Error("et: FunctionDataset: the number of samples must be >= 0, got " + std::to_string(n));
  }
  std::int64_t size() const { return n_; }

  template <class D>
  Batch<D> allocate(std::int64_t rows) const {
    return std::apply([&](const auto&... spec) { return Batch<D>{allocate_one<D>(spec, rows)...}; }, specs_);
  }

  template <class D>
  void fill(std::int64_t sample, std::int64_t row, const Batch<D>& out) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      f_(sample, detail::sample_row(std::get<I>(out), row)...);
    }(std::index_sequence_for<Specs...>{});
  }

 private:
  template <class D, class T, int R>
  static Tensor<T, R + 1, D> allocate_one(const SampleSpec<T, R>& spec, std::int64_t rows) {
    Shape<R + 1> shape;
    shape[0] = rows;
    for (int i = 0; i < R; ++i) shape[std::size_t(i) + 1] = spec.shape[std::size_t(i)];
    return Tensor<T, R + 1, D>::allocate(shape);
  }

  std::int64_t n_;
  mutable F f_;
  std::tuple<Specs...> specs_;
};

template <class F, class... Specs>
FunctionDataset<F, Specs...> from_function(std::int64_t n, F f, Specs... specs) {
  return FunctionDataset<F, Specs...>(n, std::move(f), specs...);
}

namespace detail {

/// 0, 1, ..., n - 1, shuffled (Fisher-Yates) by (seed, epoch).
inline std::vector<std::int64_t> order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[std::size_t(i)] = i;
  if (!shuffle) return out;
  std::uint64_t state = et::detail::splitmix64(seed ^ et::detail::splitmix64(static_cast<std::uint64_t>(epoch)));
  for (std::int64_t i = n - 1; i > 0; --i) {
    state = et::detail::splitmix64(state);
    std::swap(out[std::size_t(i)], out[std::size_t(state % std::uint64_t(i + 1))]);
  }
  return out;
}

}  // namespace detail

/// Batches of a dataset on device D, one batch ahead (see the top of this file). A dataset
/// is a type with size(), allocate<D>(rows) and fill<D>(sample, row, batch), as
/// TensorDataset and FunctionDataset. Iterate over it once per epoch; only one epoch runs at a time.
template <class Dataset, Device D>
class DataLoader {
  static_assert(std::is_same_v<D, Cpu> || D::is_cuda, "et: DataLoader delivers batches to et::Cpu or a CUDA device");
  using Host = std::conditional_t<D::is_cuda, Pinned, Cpu>;  // where batches are assembled

 public:
  using Batch = typename Dataset::template Batch<D>;

  DataLoader(Dataset dataset, D, LoaderOptions options = {})
      : dataset_(std::move(dataset)), options_(options), copy_stream_(Stream<D>::create()) {
    if (options.batch_size < 1)
      throw Error("et: DataLoader: batch_size must be at least 1, got " + std::to_string(options.batch_size));
  }

  /// Batches per epoch.
  std::int64_t size() const {
    const std::int64_t n = dataset_.size(), b = options_.batch_size;
    return options_.drop_last || n % b == 0 ? n / b : n / b + 1;  // n + b - 1 may pass int64
  }
  /// Epochs begun so far.
  std::int64_t epochs() const { return epoch_; }
  const Dataset& dataset() const { return dataset_; }
  /// Called after each batch of an epoch (when the loop moves past it).
  void on_progress(std::function<void(const Progress&)> hook) { hook_ = std::move(hook); }

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(DataLoader* loader) : loader_(loader) {}
    /// The batch, ready for the current stream (which waits for its copy, without the host).
    const Batch& operator*() const { return loader_->current(); }
    Iterator& operator++() {
      loader_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return loader_ == nullptr || loader_->done(); }

   private:
    DataLoader* loader_ = nullptr;
  };

  /// Begins an epoch: a new order, the first two batches under way.
  Iterator begin() {
    order_ = detail::order(dataset_.size(), options_.shuffle, options_.seed, epoch_);
    progress_ = Progress{epoch_, 0, size(), 0, 0};
    ++epoch_;
    started_ = std::chrono::steady_clock::now();
    batch_ = 0;
    for (auto& slot : slots_) slot.ready = false;
    issue(0);
    issue(1);
    return Iterator(this);
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  struct Slot {
    typename Dataset::template Batch<Host> staging;  // reused: host writes wait for its copy in flight
    std::int64_t staging_rows = -1;
    Batch batch;
    Event<D> copied;
    bool ready = false;
    bool waited = false;
  };

  bool done() const { return batch_ >= size(); }

  void issue(std::int64_t b) {
    if (b >= size()) return;
    Slot& slot = slots_[std::size_t(b % 2)];
    const std::int64_t first = b * options_.batch_size;
    const std::int64_t rows = std::min(options_.batch_size, dataset_.size() - first);
    if (slot.staging_rows != rows) {
      slot.staging = dataset_.template allocate<Host>(rows);
      slot.staging_rows = rows;
    }
    for (std::int64_t r = 0; r < rows; ++r)
      dataset_.template fill<Host>(order_[std::size_t(first + r)], r, slot.staging);
    if constexpr (D::is_cuda) {
      StreamGuard on(copy_stream_);
      slot.batch = std::apply([](const auto&... t) { return Batch{t.to(D{}, non_blocking)...}; }, slot.staging);
      slot.copied.record();  // the staging is reused: host writes to it wait for this copy
    } else {
      slot.batch = slot.staging;
      slot.staging_rows = -1;  // handed out: the next batch needs its own tensors
    }
    slot.ready = true;
    slot.waited = false;
  }

  const Batch& current() {
    if (done()) throw Error("et: DataLoader: the epoch has no more batches");
    Slot& slot = slots_[std::size_t(batch_ % 2)];
    if (!slot.waited) {
      current_stream(D{}).wait(slot.copied);
      slot.waited = true;
    }
    return slot.batch;
  }

  void advance() {
    const std::int64_t rows = std::min(options_.batch_size, dataset_.size() - batch_ * options_.batch_size);
    ++batch_;
    progress_.batch = batch_;
    progress_.samples += rows;
    progress_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    issue(batch_ + 1);
    if (hook_) hook_(progress_);
  }

  Dataset dataset_;
  LoaderOptions options_;
  Stream<D> copy_stream_;
  Slot slots_[2];
  std::vector<std::int64_t> order_;
  std::int64_t epoch_ = 0, batch_ = 0;
  Progress progress_;
  std::chrono::steady_clock::time_point started_;
  std::function<void(const Progress&)> hook_;
};

template <class Dataset, Device D>
DataLoader(Dataset, D, LoaderOptions = {}) -> DataLoader<Dataset, D>;

}  // namespace et::data
