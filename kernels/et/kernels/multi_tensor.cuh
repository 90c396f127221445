// Device code only: the multi-tensor update kernel (optimizers). Block b updates one
// chunk of one tensor of the list (et/backend/tensor_list.hpp): `update(arrays, i)` for each
// of its elements, with the K arrays of that tensor. Included by
// include/et/backend/cuda/multi_tensor.hpp; compiled only by nvcc.
#pragma once

#include <cstdint>

namespace et::kernels {

template <class List, class Update>
__global__ void __launch_bounds__(256) multi_tensor_apply(List list, Update update) {
  const auto b = static_cast<std::int64_t>(blockIdx.x);
  const int k = list.tensor_of(b);
  const std::int64_t begin = (b - list.block_start[k]) * List::chunk;
  const std::int64_t end = begin + List::chunk < list.size[k] ? begin + List::chunk : list.size[k];
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) update(list.arrays[k], i);
}

}  // namespace et::kernels
