// Pooling on the CPU, on contiguous buffers of the compute type (float or double) in the
// layout's axis order: a direct loop over the windows, one (image, channel) plane per
// OpenMP task, so no two tasks write the same element (the backward scatters stay
// race-free). Convolution: backend/cpu/conv.hpp.
#pragma once

#include <algorithm>
#include <cstdint>

#include "et/backend/nn_shapes.hpp"

namespace et::detail::cpu_backend::nn {

/// Element offsets of one (image, channel) plane of a pooling input or output: element
/// (h, w) of plane (n, c) is at base(n, c) + h * row + w * column.
struct PlaneStrides {
  std::int64_t image, channel, row, column;
  std::int64_t base(std::int64_t n, std::int64_t c) const { return n * image + c * channel; }
};

inline PlaneStrides plane_strides(Layout layout, std::int64_t c, std::int64_t h, std::int64_t w) {
  if (layout == Layout::nhwc) return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
}

/// The in-image part [h_begin, h_end) x [w_begin, w_end) of output (p, q)'s window.
struct Window {
  std::int64_t h_begin, h_end, w_begin, w_end;
};

inline Window pool_window(const PoolGeometry& g, std::int64_t p, std::int64_t q) {
  const std::int64_t h0 = p * g.stride[0] - g.padding[0], w0 = q * g.stride[1] - g.padding[1];
  return {std::max<std::int64_t>(h0, 0), std::min(h0 + g.kernel[0], g.h), std::max<std::int64_t>(w0, 0),
          std::min(w0 + g.kernel[1], g.w)};
}

/// Offset (within its plane) of the window's maximum: the first maximum in row-major
/// order, or the first NaN (NaN propagates, as in PyTorch). Padding never wins.
template <class Acc>
std::int64_t window_argmax(const Acc* plane, const PlaneStrides& st, const Window& win) {
  std::int64_t best = win.h_begin * st.row + win.w_begin * st.column;
  Acc max = plane[best];
  for (std::int64_t h = win.h_begin; h < win.h_end; ++h) {
    for (std::int64_t w = win.w_begin; w < win.w_end; ++w) {
      const std::int64_t at = h * st.row + w * st.column;
      const Acc v = plane[at];
      if (v > max || (v != v && max == max)) {
        max = v;
        best = at;
      }
    }
  }
  return best;
}

/// The divisor of avg pooling for one window: the whole kernel (the window never reaches
/// past the padding, since output extents round down), or its in-image part.
inline std::int64_t window_divisor(const PoolGeometry& g, const Window& win) {
  return g.count_include_pad ? g.kernel[0] * g.kernel[1] : (win.h_end - win.h_begin) * (win.w_end - win.w_begin);
}

/// Calls f(input plane offset, output plane offset) for every (image, channel) plane, in
/// parallel; each plane is one task's alone.
template <class F>
void for_each_plane(const PoolGeometry& g, const PlaneStrides& in, const PlaneStrides& out, F f) {
  const std::int64_t planes = g.n * g.c;
#pragma omp parallel for if (planes * g.h * g.w >= (std::int64_t{1} << 15)) schedule(static)
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const std::int64_t n = plane / g.c, c = plane % g.c;
    f(in.base(n, c), out.base(n, c));
  }
}

template <class Acc>
void max_pool2d_forward(const PoolGeometry& g, const Acc* x, Acc* y) {
  const PlaneStrides in = plane_strides(g.layout, g.c, g.h, g.w), out = plane_strides(g.layout, g.c, g.p, g.q);
  for_each_plane(g, in, out, [&](std::int64_t x_base, std::int64_t y_base) {
    for (std::int64_t p = 0; p < g.p; ++p)
      for (std::int64_t q = 0; q < g.q; ++q)
        y[y_base + p * out.row + q * out.column] = x[x_base + window_argmax(x + x_base, in, pool_window(g, p, q))];
  });
}

template <class Acc>
void avg_pool2d_forward(const PoolGeometry& g, const Acc* x, Acc* y) {
  const PlaneStrides in = plane_strides(g.layout, g.c, g.h, g.w), out = plane_strides(g.layout, g.c, g.p, g.q);
  for_each_plane(g, in, out, [&](std::int64_t x_base, std::int64_t y_base) {
    for (std::int64_t p = 0; p < g.p; ++p) {
      for (std::int64_t q = 0; q < g.q; ++q) {
        const Window win = pool_window(g, p, q);
        Acc sum = 0;
        for (std::int64_t h = win.h_begin; h < win.h_end; ++h)
          for (std::int64_t w = win.w_begin; w < win.w_end; ++w) sum += x[x_base + h * in.row + w * in.column];
        y[y_base + p * out.row + q * out.column] = sum / static_cast<Acc>(window_divisor(g, win));
      }
    }
  });
}

/// dx: each output's gradient goes to its window's maximum (window_argmax), recomputed
/// from x.
template <class Acc>
void max_pool2d_backward(const PoolGeometry& g, const Acc* dy, const Acc* x, Acc* dx) {
  const PlaneStrides in = plane_strides(g.layout, g.c, g.h, g.w), out = plane_strides(g.layout, g.c, g.p, g.q);
  for_each_plane(g, in, out, [&](std::int64_t x_base, std::int64_t y_base) {
    for (std::int64_t h = 0; h < g.h; ++h)
      for (std::int64_t w = 0; w < g.w; ++w) dx[x_base + h * in.row + w * in.column] = 0;
    for (std::int64_t p = 0; p < g.p; ++p)
      for (std::int64_t q = 0; q < g.q; ++q)
        dx[x_base + window_argmax(x + x_base, in, pool_window(g, p, q))] += dy[y_base + p * out.row + q * out.column];
  });
}

template <class Acc>
void avg_pool2d_backward(const PoolGeometry& g, const Acc* dy, Acc* dx) {
  const PlaneStrides in = plane_strides(g.layout, g.c, g.h, g.w), out = plane_strides(g.layout, g.c, g.p, g.q);
  for_each_plane(g, in, out, [&](std::int64_t x_base, std::int64_t y_base) {
    for (std::int64_t h = 0; h < g.h; ++h)
      for (std::int64_t w = 0; w < g.w; ++w) dx[x_base + h * in.row + w * in.column] = 0;
    for (std::int64_t p = 0; p < g.p; ++p) {
      for (std::int64_t q = 0; q < g.q; ++q) {
        const Window win = pool_window(g, p, q);
        const Acc share = dy[y_base + p * out.row + q * out.column] / static_cast<Acc>(window_divisor(g, win));
        for (std::int64_t h = win.h_begin; h < win.h_end; ++h)
          for (std::int64_t w = win.w_begin; w < win.w_end; ++w) dx[x_base + h * in.row + w * in.column] += share;
      }
    }
  });
}

}  // namespace et::detail::cpu_backend::nn
