// mdspan views of tensors, for code that indexes a tensor itself (a user's CUDA kernel, a
// loop on the host) without copying:
//
//   #include <et/interop/mdspan.hpp>
//   auto v = et::as_mdspan(t);                 // t: Tensor<float, 2, D>, any layout
//   my_kernel<<<blocks, threads>>>(v);         // __global__ void my_kernel(et::mdspan_t<float, 2> v)
//   ... v(i, j) = 2 * v(i, j);                 // in the kernel (or on the host for host tensors)
//
// The view is std::mdspan where the standard library has it, else the CUDA toolkit's
// cuda::std::mdspan (libcu++, usable in host and device code alike), with int64 extents
// and layout_stride (so transposed and sliced views keep their strides; a broadcast view,
// with a stride 0 that layout_stride does not allow, is refused). It holds a plain
// pointer: the tensor must outlive every use, and a CUDA tensor's view may be read only on
// its device. Not included by et/et.hpp: the toolkit's mdspan header alone costs about
// 1.6 s of nvcc time in every file, so a file that wants views includes this one. It
// defines ET_HAS_MDSPAN (1: std::mdspan, 2: cuda::std::mdspan) where either exists.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#if __has_include(<mdspan>) && __cplusplus > 202002L
#include <mdspan>
#if defined(__cpp_lib_mdspan)
#define ET_HAS_MDSPAN 1  // std::mdspan
#endif
#endif
#if !defined(ET_HAS_MDSPAN) && __has_include(<cuda/std/mdspan>)
#include <cuda/std/mdspan>
#define ET_HAS_MDSPAN 2  // cuda::std::mdspan
#endif

#if defined(ET_HAS_MDSPAN)

#include "et/runtime/error.hpp"
#include "et/tensor.hpp"

namespace et {

namespace detail {
#if ET_HAS_MDSPAN == 1
namespace md = std;
#else
namespace md = cuda::std;
#endif
}  // namespace detail

/// The mdspan type of a rank-R view of T elements: int64 extents, any strides.
template <class T, int R>
using mdspan_t = detail::md::mdspan<T, detail::md::dextents<std::int64_t, static_cast<std::size_t>(R)>,
                                    detail::md::layout_stride>;

/// A view of t's elements with t's shape and strides (no copy). Throws et::Error for an
/// undefined tensor or a broadcast one (a stride 0 along an axis longer than 1).
template <class T, int R, class D>
mdspan_t<T, R> as_mdspan(const Tensor<T, R, D>& t) {
  if (!t.defined()) throw Error("et: as_mdspan() of an undefined tensor");
  using Extents = detail::md::dextents<std::int64_t, static_cast<std::size_t>(R)>;
  detail::md::array<std::int64_t, static_cast<std::size_t>(R)> extents{}, strides{};
  for (int d = 0; d < R; ++d) {
    extents[static_cast<std::size_t>(d)] = t.size(d);
    std::int64_t stride = t.strides()[static_cast<std::size_t>(d)];
    if (stride <= 0 && t.size(d) > 1)
      throw Error("et: as_mdspan() of a broadcast view (stride 0 along axis " + std::to_string(d) +
                  "), which mdspan's layout_stride cannot describe: view t.contiguous() instead");
    strides[static_cast<std::size_t>(d)] = stride > 0 ? stride : 1;  // extent 0 or 1: any stride reads the same
  }
  const typename detail::md::layout_stride::template mapping<Extents> mapping(Extents(extents), strides);
  return mdspan_t<T, R>(t.data(), mapping);
}

}  // namespace et

#endif
