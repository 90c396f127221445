// cumsum, sort and topk on a CUDA device (ops/scan.hpp), by CUB: a scan by key over the
// rows (DeviceScan::InclusiveSumByKey, one pass) and a stable segmented sort of the rows
// with their positions (DeviceSegmentedSort), each with its temporary storage from the
// caching allocator, on the device's current stream. Only for nvcc, and only where the
// file defines ET_WITH_CUB: CUB's headers add about 6 s of nvcc time to every file that
// includes them, so et/et.hpp leaves them out unless asked (ops/scan.hpp).
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/scan.hpp launches kernels: compile this file with nvcc"
#endif

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_transform.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>

#include "et/backend/cuda/index.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail::cuda_backend {

/// Runs a CUB device-wide algorithm: `run(temp, bytes)` once to size its temporary storage
/// and once with it.
template <int I, class Run>
void run_cub(Run run) {
  std::size_t bytes = 0;
  ET_CUDA_CHECK(run(nullptr, bytes));
  const std::shared_ptr<void> temp = allocate_on<Cuda<I>>(bytes > 0 ? bytes : 1);
  ET_CUDA_CHECK(run(temp.get(), bytes));
}

template <int I, class T, class Out>
void cumsum_rows(Backend<I>, const T* in, Out* out, std::int64_t rows, std::int64_t length) {
  const CudaCall call(I, "cumsum");
  // Integers add in uint64, which wraps around as PyTorch's int64 sums do (a signed overflow
  // is undefined behaviour); the sums are converted back to int64, two's complement.
  using Acc = std::conditional_t<is_floating_v<T>, compute_t<T>, std::uint64_t>;
  const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(0), kernels::RowOf{length});
  const auto values = thrust::make_transform_iterator(in, kernels::ConvertTo<Acc>{});
  auto sums = [&] {
    if constexpr (std::is_same_v<Out, Acc>) return out;
    else return thrust::make_transform_output_iterator(out, kernels::ConvertTo<Out>{});
  }();
  run_cub<I>([&](void* temp, std::size_t& bytes) {
    return cub::DeviceScan::InclusiveSumByKey(temp, bytes, keys, values, sums, rows * length,
                                              ::cuda::std::equal_to<>{}, call.stream());
  });
}

/// Where each value of each row comes from when the row is sorted: the values turned into
/// unsigned keys of the same order (NaN greatest, -0 = +0: CUB alone orders neither as
/// PyTorch does), sorted stably with their positions.
template <int I, class T>
void sort_rows(Backend<I>, const T* in, std::int64_t* indices, std::int64_t rows, std::int64_t length,
               bool descending) {
  const CudaCall call(I, "sort");
  using Key = decltype(ordered_key(std::declval<T>()));
  const std::int64_t n = rows * length;
  const std::shared_ptr<void> scratch = allocate_on<Cuda<I>>(static_cast<std::size_t>(n) * (8 + 2 * sizeof(Key)));
  auto* from = static_cast<std::int64_t*>(scratch.get());
  auto* keys = reinterpret_cast<Key*>(from + n);
  Key* sorted_keys = keys + n;
  const auto counting = thrust::counting_iterator<std::int64_t>(0);
  run_cub<I>([&](void* temp, std::size_t& bytes) {
    return cub::DeviceTransform::Transform(temp, bytes, counting, from, n, kernels::InRow{length}, call.stream());
  });
  run_cub<I>([&](void* temp, std::size_t& bytes) {
    return cub::DeviceTransform::Transform(temp, bytes, in, keys, n, kernels::OrderedKeyOf{}, call.stream());
  });
  const auto starts = thrust::make_transform_iterator(counting, kernels::RowStart{length});
  const auto ends = thrust::make_transform_iterator(thrust::counting_iterator<std::int64_t>(1), kernels::RowStart{length});
  run_cub<I>([&](void* temp, std::size_t& bytes) {
    return descending ? cub::DeviceSegmentedSort::StableSortPairsDescending(temp, bytes, keys, sorted_keys, from, indices,
                                                                            n, rows, starts, ends, call.stream())
                      : cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys, sorted_keys, from, indices, n,
                                                                  rows, starts, ends, call.stream());
  });
}

}  // namespace et::detail::cuda_backend
