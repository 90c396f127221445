// The argument of a multi-tensor update (PyTorch's multi_tensor_apply): up to
// TensorList::capacity tensors, K arrays each (a parameter, its gradient, its optimizer
// state), updated elementwise by ONE kernel launch (one parallel loop on the CPU). Block b
// of the launch works on tensor k where block_start[k] <= b < block_start[k + 1], on the
// elements [(b - block_start[k]) * chunk, ... + chunk) of it.
#pragma once

#include <cmath>
#include <cstdint>

#include "et/config.hpp"

namespace et::detail {

template <class T, int K>
struct TensorList {
  /// 256 tensors of 4 arrays: 12 KiB of kernel arguments, inside CUDA's 32 KiB.
  static constexpr int capacity = 256;
  /// Elements per block.
  static constexpr std::int64_t chunk = 4096;

  T* arrays[capacity][K];
  std::int64_t size[capacity];
  std::int64_t block_start[capacity + 1];
  int count = 0;

  std::int64_t blocks() const { return block_start[count]; }
  /// Appends a tensor of n > 0 elements; false when the list is full.
  bool add(T* const (&pointers)[K], std::int64_t n) {
    if (count == capacity) return false;
    if (count == 0) block_start[0] = 0;
    for (int a = 0; a < K; ++a) arrays[count][a] = pointers[a];
    size[count] = n;
    block_start[count + 1] = block_start[count] + (n + chunk - 1) / chunk;
    ++count;
    return true;
  }
  /// The tensor block b works on (the last k with block_start[k] <= b).
  ET_HD int tensor_of(std::int64_t b) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (block_start[mid] <= b) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
};

/// What a multi-tensor norm adds up per element (nn::clip_grad_norm_): |x|^p summed in
/// double, or, for the infinity norm, the largest |x| (a NaN anywhere gives NaN, as
/// PyTorch's norms do). `finish` turns the total into the norm.
struct NormKind {
  double p = 2;
  bool largest = false;  // the infinity norm
  ET_HD double term(double x) const {
    return largest || p == 1 ? ::fabs(x) : p == 2 ? x * x : ::pow(::fabs(x), p);
  }
  ET_HD double combine(double a, double b) const {
    if (!largest) return a + b;
    return a != a || a > b ? a : b;  // NaN wins
  }
  ET_HD double finish(double total) const {
    return largest || p == 1 ? total : p == 2 ? ::sqrt(total) : ::pow(total, 1 / p);
  }
};

}  // namespace et::detail
