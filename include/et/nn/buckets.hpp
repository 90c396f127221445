// The gradient buckets of DistributedDataParallel and DataParallel: which parameters go
// together into one collective, and when a bucket is complete. Parameters are taken in the
// reverse of parameters() order (the order in which a backward usually completes them) and
// grouped into buckets of about `bucket_bytes`; a bucket is ready when every replica (one
// for DDP, one per GPU for DataParallel) has completed the gradients of all its members in
// this backward. Host bookkeeping only: the owners launch the collectives.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "et/runtime/error.hpp"

namespace et::nn::detail {

/// The gradient sizes, in bytes, of optimizer parameters (optim::Parameter), in order.
template <class Params>
std::vector<double> parameter_bytes(const Params& params) {
  std::vector<double> out;
  for (const auto& p : params)
    out.push_back(double(p.numel()) * sizeof(typename std::remove_cvref_t<decltype(p.data())>::value_type));
  return out;
}

class GradientBuckets {
 public:
  /// `bytes[k]`: parameter k's gradient size; `owner` names the wrapper in errors.
  GradientBuckets(const std::vector<double>& bytes, double bucket_bytes, std::size_t replicas, std::string owner)
      : owner_(std::move(owner)), replicas_(replicas), bucket_of_(bytes.size()) {
    if (!(bucket_bytes > 0)) throw Error("et: " + owner_ + ": bucket_mb must be > 0");
    double filled = 0;
    for (std::size_t k = bytes.size(); k-- > 0;) {
      if (members_.empty() || (filled > 0 && filled + bytes[k] > bucket_bytes)) {
        members_.emplace_back();
        filled = 0;
      }
      members_.back().push_back(k);
      bucket_of_[k] = members_.size() - 1;
      filled += bytes[k];
    }
    ready_.assign(members_.size(), 0);
    seen_.assign(replicas * bytes.size(), 0);
  }

  /// The buckets, as parameter indices, in launch order.
  const std::vector<std::vector<std::size_t>>& members() const noexcept { return members_; }

  /// Marks gradient k of replica r complete in this backward; returns its bucket when that
  /// completed the bucket on every replica.
  std::optional<std::size_t> complete(std::size_t r, std::size_t k) {
    char& mark = seen_[r * bucket_of_.size() + k];
    if (mark)
      throw Error("et: " + owner_ + ": parameter " + std::to_string(k) +
                  (replicas_ > 1 ? " of replica " + std::to_string(r) : std::string()) +
                  " got its gradient twice in one backward; each backward may complete it once");
    mark = 1;
    const std::size_t b = bucket_of_[k];
    if (++ready_[b] != replicas_ * members_[b].size()) return std::nullopt;
    return b;
  }

  /// Counts a launched bucket; true when it was the backward's last (the counts start over).
  bool launched_last() {
    if (++launched_ != members_.size()) return false;
    reset();
    return true;
  }

  /// Throws, naming them, when the last backward left parameters without a gradient (on
  /// some replica): their buckets never went out. The counts start over.
  void check_finished() {
    const std::size_t count = bucket_of_.size();
    std::string missing;
    bool any = false;
    for (std::size_t k = 0; k != count; ++k) {
      bool all = true;
      for (std::size_t r = 0; r != replicas_; ++r) {
        any = any || seen_[r * count + k];
        all = all && seen_[r * count + k];
      }
      if (!all) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    }
    if (!any) return;
    reset();
    throw Error("et: " + owner_ + ": the last backward gave no gradient to parameter(s) " + missing +
                " (in parameters() order)" + (replicas_ > 1 ? " on every GPU" : "") +
                ", so their buckets were never reduced; every parameter must take part in every backward");
  }

 private:
  void reset() {
    launched_ = 0;
    std::fill(seen_.begin(), seen_.end(), char(0));
    std::fill(ready_.begin(), ready_.end(), std::size_t(0));
  }

  std::string owner_;
  std::size_t replicas_;
  std::vector<std::vector<std::size_t>> members_;
  std::vector<std::size_t> bucket_of_, ready_;
  std::vector<char> seen_;
  std::size_t launched_ = 0;
};

}  // namespace et::nn::detail
