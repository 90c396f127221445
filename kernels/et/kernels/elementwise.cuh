// Device code only: the fused elementwise kernels. An expression compiles into two
// kernels, each inlining its program a few times: the linear kernel (V-wide body plus a
// scalar tail, 64-bit indices; broadcast operands read wrapped) and the 32-bit strided
// kernel (strided_unroll elements per thread; tiles through shared memory where an operand
// is read transposed), which takes any layout: offsets past 32 bits are evaluated in boxes
// (backend/cuda/elementwise.hpp). Plus, for programs with shared subexpressions, the kernel
// that materializes one binding, and an assignment's fused backward. Included by
// include/et/backend/cuda/elementwise.hpp; compiled only by nvcc.
#pragma once

#include "et/eval/evaluator.hpp"

namespace et::kernels {

/// i + stride, or `end` when that would reach past it: never overflows Index, so 32-bit
/// indices serve every n below 2^31.
template <class Index>
__device__ __forceinline__ Index next_index(Index i, Index stride, Index end) {
  return end - i > stride ? i + stride : end;
}

/// The linear and strided kernels run each thread once, without a loop: the launcher gives
/// one thread per (vector of) element(s) or per strided_unroll elements, within the grid
/// limit (2^31 - 1 blocks). A grid-stride loop would never take a second step but costs a
/// tiny launch a fifth of its time (measured in a CUDA graph of 1000 dependent launches on
/// 1024 floats, H200: 1.11 us per kernel with the loop, 0.97 without).
///
/// A contiguous output whose operands all read at the output's linear index. When
/// `vectorized`, thread t moves elements [tV, tV + V) with 16-byte accesses, and threads
/// below n % V then write the scalar tail.
template <int V, class Writer, class Reader, class Index>
__global__ void __launch_bounds__(256) elementwise_linear(Writer out, Reader in, Index n, bool vectorized) {
  const Index t = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  Index tail_start = 0;
  if (vectorized) {
    const Index vectors = n / V;
    if (t < vectors) out.template vector<V>(t * V, in.template vector<V>(t * V));
    tail_start = vectors * V;
  }
  if (t < n - tail_start) out.linear(tail_start + t, in.linear(tail_start + t));
}

/// Elements per thread on the strided path. A thread issues the loads of all of them
/// before its first store: with scalar accesses one element per thread leaves too few
/// requests in flight to cover memory latency (measured: a broadcast bias-add over a
/// 16384^2 matrix at 0.46x of copy bandwidth).
inline constexpr int strided_unroll = 4;

/// Tiles of the strided kernel where an operand is read transposed: tile x tile elements
/// of the last two axes, one block each; each transposed operand's tile is first copied
/// into shared memory along its own contiguous axis (coalesced), then read from there, so
/// every global read and write is coalesced. The padding column keeps both shared-memory
/// passes free of bank conflicts.
inline constexpr int tile = 32, tile_pitch = tile + 1;
static_assert(tile * tile == 256 * strided_unroll);
/// Shared memory for one staged operand of element type T (16-byte aligned).
template <class T>
inline constexpr std::size_t staged_tile_bytes = (sizeof(T) * tile * tile_pitch + 15) / 16 * 16;

/// True for an operand of a rank >= 2 index space read transposed: unit steps along the
/// rows (axis R - 2) and larger ones along the columns.
template <int R, class Index>
ET_HD bool reads_transposed(const Index (&strides)[R > 0 ? R : 1]) {
  if constexpr (R < 2) return false;
  else return strides[R - 2] == 1 && strides[R - 1] != 0 && strides[R - 1] != 1;
}

/// Where the tiled launch is: the last two extents and the tiles along them (tiles_c 0:
/// not tiled, elements in row-major order), and the shared memory its transposed operands take.
/// Or, for the rows launch (runs > 0): `rows` rows of `cols` elements (every axis but the
/// last flattened), each cut into `runs` runs of row_run elements.
template <class Index>
struct TileGrid {
  Index rows = 1, cols = 1, tiles_r = 0, tiles_c = 0, runs = 0;
};

/// The rows launch: a warp takes a run of 32 * strided_unroll consecutive elements of one
/// row, lane l the ones at l, l + 32, ...; a block's warps take the same run of consecutive
/// rows, so that a stencil's neighbours in the rows above and below are read by the same
/// block (through its L1). Each thread finds its coordinate once and rebases every operand
/// there (RebaseTo): its elements are then at unit offsets, read through linear().
inline constexpr int row_run = 32 * strided_unroll;

/// Copies the tile at (r0, c0) of every transposed operand of `in` into shared memory and
/// points the operand there: afterwards it reads element (.., r, c) of the tile at
/// tile_memory[c - c0][r - r0], found through its strides from the same coordinates.
template <class Reader, int R, class Index>
__device__ void stage_transposed(Reader& in, const detail::Coord<R, Index>& origin, const TileGrid<Index>& g,
                                 unsigned char* tile_memory) {
  std::size_t offset = 0;
  auto stage = [&](auto& reader) {
    using T = std::remove_cvref_t<decltype(*reader.data)>;
    if (!reads_transposed<R, Index>(reader.strides)) return;
    T* staged = reinterpret_cast<T*>(tile_memory + offset);
    offset += staged_tile_bytes<T>;
    const T* source = reader.data + detail::dot<R, Index>(origin, reader.strides);
    const Index column_step = reader.strides[R - 1];
    const Index r0 = origin.c[R - 2], c0 = origin.c[R - 1];
#pragma unroll
    for (int k = 0; k < strided_unroll; ++k) {
      const int e = static_cast<int>(threadIdx.x) + k * 256, r = e % tile, c = e / tile;  // r fastest: coalesced
      if (r0 + r < g.rows && c0 + c < g.cols) staged[c * tile_pitch + r] = source[r + c * column_step];
    }
    reader.data = reinterpret_cast<const T*>(reinterpret_cast<std::uintptr_t>(staged) -
                                             sizeof(T) * static_cast<std::uintptr_t>(r0 + c0 * tile_pitch));
    for (int d = 0; d < R - 2; ++d) reader.strides[d] = 0;
    reader.strides[R - 2] = 1;
    reader.strides[R - 1] = tile_pitch;
  };
  for_each_tensor_reader(in, stage);
  __syncthreads();
}

/// The rows launch of elementwise_strided (TileGrid, row_run): the output at unit stride
/// along the last axis, every operand at stride 1 or 0 there (RowsReadable).
template <class Writer, class Reader, int R, class Index>
__device__ __forceinline__ void strided_rows(Writer out, Reader in, const detail::Coord<R, Index>& extents,
                                             const TileGrid<Index>& g) {
  constexpr int U = strided_unroll;
  const Index warps = static_cast<Index>(blockDim.x) / 32;
  const Index lane = static_cast<Index>(threadIdx.x) % 32;
  const Index row = static_cast<Index>(blockIdx.x) / g.runs * warps + static_cast<Index>(threadIdx.x) / 32;
  const Index col = static_cast<Index>(blockIdx.x) % g.runs * row_run + lane;
  if (row >= g.rows || col >= g.cols) return;
  detail::Coord<R, Index> c{};
  c.c[R - 1] = col;
  Index rest = row;
  for (int d = R - 2; d > 0; --d) {
    c.c[d] = rest % extents.c[d];
    rest /= extents.c[d];
  }
  c.c[0] = rest;
  const detail::RebaseTo<R, Index> rebase{row * g.cols + col, c};
  for_each_leaf_reader(in, rebase);
  out.data += detail::dot<R, Index>(c, out.strides);
  typename Reader::value_type values[U];
#pragma unroll
  for (int k = 0; k < U; ++k)
    if (col + k * 32 < g.cols) {
      const auto j = static_cast<Index>(k * 32);
      values[k] = in.strided(j, detail::row_coordinate<R, Index>(j));
    }
#pragma unroll
  for (int k = 0; k < U; ++k)
    if (col + k * 32 < g.cols) out.strided(detail::row_coordinate<R, Index>(static_cast<Index>(k * 32)), values[k]);
}

/// Any layout, 32-bit indices, strided_unroll elements per thread. Rows (g.runs > 0): see
/// strided_rows. Untiled: block b covers
/// blockDim.x * strided_unroll consecutive elements, thread t the ones at t, t + blockDim.x,
/// ... (coalesced), each coordinate unravelled from its index. Tiled (g.tiles_c > 0: some
/// operand is read transposed): block b covers one tile of the last two axes, a warp a
/// row of it, and the transposed operands are read from shared memory (stage_transposed).
/// Each element's coordinate is shared by every operand (each dots it with its own,
/// possibly zero, strides).
template <class Writer, class Reader, int R, class Index>
__global__ void __launch_bounds__(256) elementwise_strided(Writer out, Reader in, detail::Coord<R, Index> extents,
                                                           Index n, TileGrid<Index> g) {
  constexpr int U = strided_unroll;
  if constexpr (R >= 2) {
    if (g.runs > 0) return strided_rows(out, in, extents, g);
  }
  extern __shared__ __align__(16) unsigned char tile_memory[];
  detail::Coord<R, Index> coords[U];
  Index indices[U];
  bool inside[U];
  Reader reader = in;
  bool tiled = false;
  if constexpr (R >= 2) {
    if (g.tiles_c > 0) {
      tiled = true;
      Index b = static_cast<Index>(blockIdx.x);
      detail::Coord<R, Index> origin{};
      origin.c[R - 1] = (b % g.tiles_c) * tile;
      b /= g.tiles_c;
      origin.c[R - 2] = (b % g.tiles_r) * tile;
      b /= g.tiles_r;
      Index outer = b;  // the index of this tile's [rows, cols] slice
      for (int d = R - 3; d >= 0; --d) {
        origin.c[d] = b % extents.c[d];
        b /= extents.c[d];
      }
      stage_transposed(reader, origin, g, tile_memory);
#pragma unroll
      for (int k = 0; k < U; ++k) {
        coords[k] = origin;
        coords[k].c[R - 2] += static_cast<Index>(threadIdx.x) / tile + k * (256 / tile);
        coords[k].c[R - 1] += static_cast<Index>(threadIdx.x) % tile;
        inside[k] = coords[k].c[R - 2] < g.rows && coords[k].c[R - 1] < g.cols;
        indices[k] = (outer * g.rows + coords[k].c[R - 2]) * g.cols + coords[k].c[R - 1];
      }
    }
  }
  if (!tiled) {
    const Index width = static_cast<Index>(blockDim.x);
    const Index base = static_cast<Index>(blockIdx.x) * width * U + static_cast<Index>(threadIdx.x);
#pragma unroll
    for (int k = 0; k < U; ++k) {
      indices[k] = base + k * width;  // < n + U * blockDim.x: inside the launcher's index margin
      inside[k] = indices[k] < n;
      if (inside[k]) coords[k] = detail::unravel<R, Index>(indices[k], extents);
    }
  }
  typename Reader::value_type values[U];
#pragma unroll
  for (int k = 0; k < U; ++k)
    if (inside[k]) values[k] = reader.strided(indices[k], coords[k]);
#pragma unroll
  for (int k = 0; k < U; ++k)
    if (inside[k]) out.strided(coords[k], values[k]);
}

/// Stores binding `select` of a program for every output element, contiguously (see
/// eval/program.hpp: an occurrence of a shared subexpression with operands of its own).
template <class Program, int R, class Index>
__global__ void __launch_bounds__(256) materialize_binding(Program in, int select, void* out,
                                                           detail::Coord<R, Index> extents, Index n) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
       i < n; i = next_index(i, stride, n))
    in.store_binding(select, out, i, detail::unravel<R, Index>(i, extents));
}

/// The fused backward of an expression (eval/tape.hpp): every input's gradient for
/// the elements of a grid-stride range, one element per thread and iteration. `linear`:
/// every operand, the upstream gradient and every gradient written are laid out like the
/// contiguous index space. One kernel per expression type (64-bit indices throughout).
template <class Program, int R>
__global__ void __launch_bounds__(256) gradient(Program program, detail::Coord<R, std::int64_t> extents,
                                                std::int64_t n, bool linear) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i = next_index(i, stride, n)) {
    if (linear) program.template run<true>(i, detail::Coord<R, std::int64_t>{});
    else program.template run<false>(i, detail::unravel<R, std::int64_t>(i, extents));
  }
}

}  // namespace et::kernels
