// A multi-tensor update or norm on the CPU: one parallel loop over the blocks of every
// tensor of the list (et/backend/tensor_list.hpp), each block a contiguous run of one tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "et/backend/backend.hpp"
#include "et/backend/tensor_list.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

template <class T, int K, class Update>
void run_multi_tensor(Backend, const TensorList<T, K>& list, const Update& update) {
  if (list.count == 0) return;
  const std::int64_t blocks = list.blocks();
#pragma omp parallel for schedule(static) if (blocks > 8)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const int k = list.tensor_of(b);
    const std::int64_t begin = (b - list.block_start[k]) * list.chunk;
    const std::int64_t end = std::min(begin + list.chunk, list.size[k]);
    for (std::int64_t i = begin; i < end; ++i) update(list.arrays[k], i);
  }
}

/// kind's total over the first array of every tensor of the list into *out (combined with
/// *out when `accumulate`, the norm itself when `finish`): blocks in parallel, their
/// partials combined in block order (the same total every run).
template <class T, int K>
void run_multi_tensor_norm(Backend, const TensorList<T, K>& list, const NormKind& kind, double* out, bool accumulate,
                           bool finish) {
  const std::int64_t blocks = list.blocks();
  std::vector<double> partials(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 8)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const int k = list.tensor_of(b);
    const std::int64_t begin = (b - list.block_start[k]) * list.chunk;
    const std::int64_t end = std::min(begin + list.chunk, list.size[k]);
    double total = 0;
    for (std::int64_t i = begin; i < end; ++i)
      total = kind.combine(total, kind.term(static_cast<double>(static_cast<compute_t<T>>(list.arrays[k][0][i]))));
    partials[static_cast<std::size_t>(b)] = total;
  }
  double total = accumulate ? *out : 0;
  for (const double partial : partials) total = kind.combine(total, partial);
  *out = finish ? kind.finish(total) : total;
}

}  // namespace et::detail::cpu_backend
