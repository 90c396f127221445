// A multi-tensor update on the CPU: one parallel loop over the blocks of every tensor of
// the list (et/backend/tensor_list.hpp), each block a contiguous run of one tensor.
#pragma once

#include <algorithm>
#include <cstdint>

#include "et/backend/backend.hpp"
#include "et/backend/tensor_list.hpp"

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

}  // namespace et::detail::cpu_backend
