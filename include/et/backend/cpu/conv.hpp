// Convolution on the CPU, on contiguous buffers of the compute type (float or double) in
// the layout's axis order (pooling: backend/cpu/pool.hpp).
//
// Convolutions are im2col + Eigen GEMM: the input windows are unrolled into a matrix (its
// columns are the R*S*C/groups kernel taps for nhwc, its rows for nchw) and multiplied by
// the weight read as a [K/groups, R*S*C/groups] matrix, whole images at a time: each thread
// takes whole images when there are at least as many as threads (Eigen then runs on one
// thread), else the images run in order with Eigen's GEMM on all threads. The nhwc forward
// pass instead unrolls tiles of output pixels small enough to stay in cache, one OpenMP
// task per (image, group, tile).
// 1x1 kernels with stride 1 and no padding skip the unrolling (the input is that matrix).
// The gradients are the same products transposed, col2im adding the unrolled input
// gradient back into its windows. Measurements, and Eigen's own tensor convolution beside
// them: docs/design.md, "Convolution and pooling".
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

// Eigen marks its functions __host__ __device__; nvcc then warns (20012) about such marks
// on defaulted members. The marks are Eigen's business, not ours: silence them here only.
#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 20012
#endif
#include <Eigen/Core>
#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif

#include "et/backend/cpu/gemm.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/runtime/threads.hpp"

namespace et::detail::cpu_backend::nn {

template <class Acc>
using RowMatrix = Eigen::Matrix<Acc, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// A row-major matrix view of a buffer: `rows` x `cols`, rows `ld` elements apart.
template <class Acc>
using RowMajorView = Eigen::Map<RowMatrix<Acc>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class Acc>
using ConstRowMajorView = Eigen::Map<const RowMatrix<Acc>, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Inside a parallel region: this thread's index in its team, and the team's size.
inline int thread_index() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

inline int team_size() {
#if defined(_OPENMP)
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/// Whether a convolution is worth a team of threads: below about 2^16 multiply-adds,
/// waking the team costs more than the work (on a loaded 2-core machine, 1000 small random
/// convolutions took 34 s on two threads and 3 s on one). Counted in double: no overflow.
inline bool worth_threads(const ConvGeometry& g) {
  const double madds = double(g.n) * double(g.k) * double(g.c_per_group()) * double(g.r) * double(g.s) *
                       double(g.p) * double(g.q);
  return get_num_threads() > 1 && madds >= threaded_madds;
}

/// Whole images per thread when there are enough of them; else Eigen's threads per GEMM.
inline bool across_batch(const ConvGeometry& g) { return g.n > 1 && g.n >= get_num_threads() && worth_threads(g); }

/// A 1x1 kernel with stride 1 and no padding: the input is its own im2col matrix.
inline bool needs_no_unrolling(const ConvGeometry& g) {
  return g.r == 1 && g.s == 1 && g.stride[0] == 1 && g.stride[1] == 1 && g.padding[0] == 0 && g.padding[1] == 0;
}

/// nchw: the [C/groups * R * S, P * Q] matrix of one image's group of channels, starting
/// at `channels` (that group's first channel plane). Out-of-image taps read 0.
template <class Acc>
void im2col_nchw(const ConvGeometry& g, const Acc* channels, Acc* col, bool parallel) {
  const std::int64_t rows = g.c_per_group() * g.r * g.s, pq = g.p * g.q;
#pragma omp parallel for if (parallel) schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t c = row / (g.r * g.s), r = (row / g.s) % g.r, s = row % g.s;
    const Acc* plane = channels + c * g.h * g.w;
    Acc* out = col + row * pq;
    for (std::int64_t p = 0; p < g.p; ++p) {
      const std::int64_t h = p * g.stride[0] - g.padding[0] + r * g.dilation[0];
      Acc* line = out + p * g.q;
      if (h < 0 || h >= g.h) {
        std::fill(line, line + g.q, Acc(0));
        continue;
      }
      const Acc* source = plane + h * g.w;
      for (std::int64_t q = 0; q < g.q; ++q) {
        const std::int64_t w = q * g.stride[1] - g.padding[1] + s * g.dilation[1];
        line[q] = w >= 0 && w < g.w ? source[w] : Acc(0);
      }
    }
  }
}

/// The adjoint of im2col_nchw: adds every entry of `col` into the input element it was
/// read from. Serial: windows overlap, so rows of `col` share destinations.
template <class Acc>
void col2im_nchw(const ConvGeometry& g, const Acc* col, Acc* channels) {
  const std::int64_t rows = g.c_per_group() * g.r * g.s, pq = g.p * g.q;
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t c = row / (g.r * g.s), r = (row / g.s) % g.r, s = row % g.s;
    Acc* plane = channels + c * g.h * g.w;
    const Acc* in = col + row * pq;
    for (std::int64_t p = 0; p < g.p; ++p) {
      const std::int64_t h = p * g.stride[0] - g.padding[0] + r * g.dilation[0];
      if (h < 0 || h >= g.h) continue;
      Acc* target = plane + h * g.w;
      const Acc* line = in + p * g.q;
      for (std::int64_t q = 0; q < g.q; ++q) {
        const std::int64_t w = q * g.stride[1] - g.padding[1] + s * g.dilation[1];
        if (w >= 0 && w < g.w) target[w] += line[q];
      }
    }
  }
}

/// nhwc: rows first_pixel .. first_pixel + pixels of the [P * Q, R * S * C/groups] matrix
/// of one image (`image` is its first element), for the group whose channels start at
/// `channel0`. Out-of-image taps read 0.
template <class Acc>
void im2col_nhwc(const ConvGeometry& g, const Acc* image, std::int64_t channel0, std::int64_t first_pixel,
                 std::int64_t pixels, Acc* col, bool parallel) {
  const std::int64_t cg = g.c_per_group(), row_length = g.r * g.s * cg;
#pragma omp parallel for if (parallel) schedule(static)
  for (std::int64_t i = 0; i < pixels; ++i) {
    const std::int64_t p = (first_pixel + i) / g.q, q = (first_pixel + i) % g.q;
    Acc* out = col + i * row_length;
    for (std::int64_t r = 0; r < g.r; ++r) {
      const std::int64_t h = p * g.stride[0] - g.padding[0] + r * g.dilation[0];
      for (std::int64_t s = 0; s < g.s; ++s) {
        const std::int64_t w = q * g.stride[1] - g.padding[1] + s * g.dilation[1];
        Acc* tap = out + (r * g.s + s) * cg;
        if (h < 0 || h >= g.h || w < 0 || w >= g.w) {
          std::fill(tap, tap + cg, Acc(0));
        } else {
          const Acc* source = image + (h * g.w + w) * g.c + channel0;
          std::copy(source, source + cg, tap);
        }
      }
    }
  }
}

/// The adjoint of im2col_nhwc (serial, as col2im_nchw).
template <class Acc>
void col2im_nhwc(const ConvGeometry& g, const Acc* col, Acc* image, std::int64_t channel0) {
  const std::int64_t cg = g.c_per_group(), row_length = g.r * g.s * cg;
  for (std::int64_t pq = 0; pq < g.p * g.q; ++pq) {
    const std::int64_t p = pq / g.q, q = pq % g.q;
    const Acc* in = col + pq * row_length;
    for (std::int64_t r = 0; r < g.r; ++r) {
      const std::int64_t h = p * g.stride[0] - g.padding[0] + r * g.dilation[0];
      if (h < 0 || h >= g.h) continue;
      for (std::int64_t s = 0; s < g.s; ++s) {
        const std::int64_t w = q * g.stride[1] - g.padding[1] + s * g.dilation[1];
        if (w < 0 || w >= g.w) continue;
        const Acc* tap = in + (r * g.s + s) * cg;
        Acc* target = image + (h * g.w + w) * g.c + channel0;
        for (std::int64_t c = 0; c < cg; ++c) target[c] += tap[c];
      }
    }
  }
}

/// The im2col matrix of image `image_index`, group `group`: a view of `x` itself when no
/// unrolling is needed, else unrolled into `col`. nchw: [RSC/g, PQ]; nhwc: [PQ, RSC/g].
template <class Acc>
ConstRowMajorView<Acc> unrolled_input(const ConvGeometry& g, const Acc* x, std::int64_t image_index, std::int64_t group,
                                    std::vector<Acc>& col, bool parallel) {
  const std::int64_t cg = g.c_per_group(), rsc = cg * g.r * g.s, pq = g.p * g.q;
  const Acc* image = x + image_index * g.c * g.h * g.w;
  if (!g.nhwc()) {
    const Acc* channels = image + group * cg * g.h * g.w;
    if (needs_no_unrolling(g)) return {channels, rsc, pq, Eigen::OuterStride<>(pq)};
    im2col_nchw(g, channels, col.data(), parallel);
    return {col.data(), rsc, pq, Eigen::OuterStride<>(pq)};
  }
  if (needs_no_unrolling(g)) return {image + group * cg, pq, rsc, Eigen::OuterStride<>(g.c)};
  im2col_nhwc(g, image, group * cg, 0, pq, col.data(), parallel);
  return {col.data(), pq, rsc, Eigen::OuterStride<>(rsc)};
}

/// Group `group` of the weight as a [K/groups, RSC/groups] matrix (both layouts: the row
/// of one output channel lists its taps in the order the im2col matrix does).
template <class Acc>
ConstRowMajorView<Acc> weight_matrix(const ConvGeometry& g, const Acc* w, std::int64_t group) {
  const std::int64_t kg = g.k_per_group(), rsc = g.c_per_group() * g.r * g.s;
  return {w + group * kg * rsc, kg, rsc, Eigen::OuterStride<>(rsc)};
}

/// Output pixels per task of the tiled nhwc forward pass: as many as keep the unrolled
/// tile within about 512 KiB, so that it is still in cache when the GEMM reads it. (Measured
/// on conv 3x3, N=8, C=K=64, 56x56: 25% faster than unrolling whole images; nchw, whose
/// unrolled rows are output rows, lost to tiling and unrolls whole images.)
inline constexpr std::int64_t nhwc_tile_bytes = std::int64_t{512} << 10;

/// The nhwc forward pass: one task per (image, group, tile of output pixels), each
/// unrolling its tile and multiplying it by the group's weight on one thread.
template <class Acc>
void conv2d_forward_nhwc_tiled(const ConvGeometry& g, const Acc* x, const Acc* w, const Acc* bias, Acc* y) {
  const std::int64_t kg = g.k_per_group(), pq = g.p * g.q, rsc = g.c_per_group() * g.r * g.s;
  const std::int64_t tile = std::min(pq, std::max<std::int64_t>(16, nhwc_tile_bytes / (rsc * std::int64_t(sizeof(Acc)))));
  const std::int64_t tiles = (pq + tile - 1) / tile, tasks = g.n * g.groups * tiles;
#pragma omp parallel if (tasks > 1 && worth_threads(g))
  {
    std::vector<Acc> col(static_cast<std::size_t>(tile * rsc));
#pragma omp for schedule(static)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t n = task / (g.groups * tiles), group = task / tiles % g.groups;
      const std::int64_t first = task % tiles * tile, pixels = std::min(tile, pq - first);
      im2col_nhwc(g, x + n * g.h * g.w * g.c, group * g.c_per_group(), first, pixels, col.data(), false);
      const ConstRowMajorView<Acc> input(col.data(), pixels, rsc, Eigen::OuterStride<>(rsc));
      Acc* out_first = y + (n * pq + first) * g.k + group * kg;
      RowMajorView<Acc> out(out_first, pixels, kg, Eigen::OuterStride<>(g.k));
      out.noalias() = input * weight_matrix(g, w, group).transpose();
      if (bias != nullptr)
        for (std::int64_t i = 0; i < pixels; ++i)
          for (std::int64_t k = 0; k < kg; ++k) out_first[i * g.k + k] += bias[group * kg + k];
    }
  }
}

/// y = conv2d(x, w) (+ bias, when not null). x, w, y contiguous in g's layout.
template <class Acc>
void conv2d_forward(const ConvGeometry& g, const Acc* x, const Acc* w, const Acc* bias, Acc* y) {
  if (g.nhwc() && !needs_no_unrolling(g)) {
    conv2d_forward_nhwc_tiled(g, x, w, bias, y);
    return;
  }
  const std::int64_t kg = g.k_per_group(), pq = g.p * g.q;
  const std::size_t col_size = needs_no_unrolling(g) ? 0 : static_cast<std::size_t>(g.c_per_group() * g.r * g.s * pq);
  const bool batch = across_batch(g);
#pragma omp parallel if (batch)
  {
    std::vector<Acc> col(col_size);
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < g.n; ++n) {
      Acc* image = y + n * g.k * pq;
      for (std::int64_t group = 0; group < g.groups; ++group) {
        const auto input = unrolled_input(g, x, n, group, col, !batch && worth_threads(g));
        const auto weight = weight_matrix(g, w, group);
        if (!g.nhwc()) {
          RowMajorView<Acc> out(image + group * kg * pq, kg, pq, Eigen::OuterStride<>(pq));
          out.noalias() = weight * input;
        } else {
          RowMajorView<Acc> out(image + group * kg, pq, kg, Eigen::OuterStride<>(g.k));
          out.noalias() = input * weight.transpose();
        }
      }
      if (bias != nullptr) {
        for (std::int64_t i = 0; i < pq; ++i)
          for (std::int64_t k = 0; k < g.k; ++k) image[g.nhwc() ? i * g.k + k : k * pq + i] += bias[k];
      }
    }
  }
}

/// dx = the gradient of conv2d with respect to its input, given dy (the output's).
template <class Acc>
void conv2d_backward_data(const ConvGeometry& g, const Acc* dy, const Acc* w, Acc* dx) {
  const std::int64_t cg = g.c_per_group(), kg = g.k_per_group(), rsc = cg * g.r * g.s, pq = g.p * g.q;
  const bool direct = needs_no_unrolling(g);
  const std::size_t col_size = direct ? 0 : static_cast<std::size_t>(rsc * pq);
  const bool batch = across_batch(g);
#pragma omp parallel if (batch)
  {
    std::vector<Acc> col(col_size);
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < g.n; ++n) {
      Acc* image = dx + n * g.c * g.h * g.w;
      std::fill(image, image + g.c * g.h * g.w, Acc(0));
      const Acc* grad = dy + n * g.k * pq;
      for (std::int64_t group = 0; group < g.groups; ++group) {
        const auto weight = weight_matrix(g, w, group);
        if (!g.nhwc()) {
          const ConstRowMajorView<Acc> grad_out(grad + group * kg * pq, kg, pq, Eigen::OuterStride<>(pq));
          Acc* channels = image + group * cg * g.h * g.w;
          RowMajorView<Acc> target(direct ? channels : col.data(), rsc, pq, Eigen::OuterStride<>(pq));
          target.noalias() = weight.transpose() * grad_out;
          if (!direct) col2im_nchw(g, col.data(), channels);
        } else {
          const ConstRowMajorView<Acc> grad_out(grad + group * kg, pq, kg, Eigen::OuterStride<>(g.k));
          if (direct) {
            RowMajorView<Acc> target(image + group * cg, pq, cg, Eigen::OuterStride<>(g.c));
            target.noalias() = grad_out * weight;
          } else {
            RowMajorView<Acc> target(col.data(), pq, rsc, Eigen::OuterStride<>(rsc));
            target.noalias() = grad_out * weight;
            col2im_nhwc(g, col.data(), image, group * cg);
          }
        }
      }
    }
  }
}

/// dw = the gradient of conv2d with respect to its weight, given x and dy. Each thread
/// sums its images into its own buffer; the buffers are added in thread order
/// (deterministic for a given thread count).
template <class Acc>
void conv2d_backward_filter(const ConvGeometry& g, const Acc* x, const Acc* dy, Acc* dw) {
  const std::int64_t kg = g.k_per_group(), rsc = g.c_per_group() * g.r * g.s, pq = g.p * g.q;
  const std::size_t weight_size = static_cast<std::size_t>(g.k * rsc);
  const std::size_t col_size = needs_no_unrolling(g) ? 0 : static_cast<std::size_t>(rsc * pq);
  const bool batch = across_batch(g);
  std::vector<std::vector<Acc>> partials;
#pragma omp parallel if (batch)
  {
#pragma omp single
    partials.resize(static_cast<std::size_t>(team_size()));
    // (the implicit barrier after `single` publishes the resized vector)
    auto& sum = partials[static_cast<std::size_t>(thread_index())];
    sum.assign(weight_size, Acc(0));
    std::vector<Acc> col(col_size);
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < g.n; ++n) {
      const Acc* grad = dy + n * g.k * pq;
      for (std::int64_t group = 0; group < g.groups; ++group) {
        const auto input = unrolled_input(g, x, n, group, col, !batch && worth_threads(g));
        RowMajorView<Acc> target(sum.data() + group * kg * rsc, kg, rsc, Eigen::OuterStride<>(rsc));
        if (!g.nhwc()) {
          const ConstRowMajorView<Acc> grad_out(grad + group * kg * pq, kg, pq, Eigen::OuterStride<>(pq));
          target.noalias() += grad_out * input.transpose();
        } else {
          const ConstRowMajorView<Acc> grad_out(grad + group * kg, pq, kg, Eigen::OuterStride<>(g.k));
          target.noalias() += grad_out.transpose() * input;
        }
      }
    }
  }
  std::fill(dw, dw + weight_size, Acc(0));
  for (const auto& partial : partials)
    for (std::size_t i = 0; i < weight_size; ++i) dw[i] += partial[i];
}

}  // namespace et::detail::cpu_backend::nn
