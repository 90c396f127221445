// Tensor creation: empty zeros ones full arange linspace rand randn from_vector.
// Shapes are braced lists of extents ({rows, cols}) or et::Shape<R> values.
// zeros, empty and from_vector run no kernel (they work in plain C++ files for CUDA
// tensors too); full, ones, arange, linspace, rand and randn evaluate one kernel.
#pragma once

#include <math.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "et/exec/assign.hpp"
#include "et/expr/operators.hpp"
#include "et/ops/random.hpp"

namespace et {

namespace detail {
template <std::size_t R>
std::array<std::int64_t, R> to_shape(const std::int64_t (&extents)[R]) {
  std::array<std::int64_t, R> shape{};
  for (std::size_t d = 0; d != R; ++d) shape[d] = extents[d];
  return shape;
}

template <class T, int R, class D, class Gen>
Tensor<T, R, D> generate(const Shape<R>& shape, Gen gen) {
  Tensor<T, R, D> out = Tensor<T, R, D>::allocate(shape);
  assign(out, GeneratorExpr<Gen, R, D>(gen, shape));
  return out;
}

/// x with each element dropped (zero) with probability p, 0 < p < 1, and the others scaled by
/// 1 / (1 - p); the mask is element i's uniform of seed's counter-based stream (nn::Dropout,
/// scaled_dot_product_attention's dropout).
template <class T, int R, class D>
Tensor<T, R, D> dropout(const Tensor<T, R, D>& x, double p, std::uint64_t seed) {
  using Gen = UniformGenerator<float>;
  const GeneratorExpr<Gen, R, D> u(Gen{seed}, x.shape());
  return where(u < static_cast<float>(p), T(0), x * T(1.0 / (1.0 - p)));
}

/// start + i * step, accumulated in double for floating types and int64 for integers.
template <class T>
struct RangeGenerator {
  using value_type = T;
  using Accumulate = std::conditional_t<is_floating_v<T>, double, std::int64_t>;
  Accumulate start, step;
  ET_HD T operator()(std::int64_t i) const {
    // An explicit fma for floating types: nvcc would contract `start + i * step` into one
    // and gcc would not, and the CPU and GPU must give the same bits.
    if constexpr (std::is_floating_point_v<Accumulate>) return static_cast<T>(::fma(static_cast<double>(i), step, start));
    else return static_cast<T>(start + static_cast<Accumulate>(i) * step);
  }
};

/// Evenly spaced from a to b, computed from both ends (as PyTorch does) so b is exact.
template <class T>
struct LinspaceGenerator {
  using value_type = T;
  double start, end, step;
  std::int64_t count;
  ET_HD T operator()(std::int64_t i) const {
    // Explicit fma, as in RangeGenerator: the same bits on the CPU and the GPU.
    return static_cast<T>(2 * i < count ? ::fma(step, static_cast<double>(i), start)
                                        : ::fma(-step, static_cast<double>(count - 1 - i), end));
  }
};

/// The coordinate along one axis of a row-major index space: element i's
/// (i / stride) % extent, as T (et::index_grid).
template <class T>
struct IndexGridGenerator {
  using value_type = T;
  std::int64_t stride, extent;
  ET_HD T operator()(std::int64_t i) const { return static_cast<T>(i / stride % extent); }
};

inline void check_finite(double value, const char* what) {
  if (!std::isfinite(value)) throw Error(std::string("et: ") + what + " must be finite, got " + std::to_string(value));
}
}  // namespace detail

/// Uninitialized contiguous tensor. Throws ShapeError for negative or overflowing extents,
/// et::Error for a CUDA device past device_count(), et::OutOfMemory when allocation fails.
template <Element T, Device D, std::size_t R>
Tensor<T, int(R), D> empty(D, const std::array<std::int64_t, R>& shape) {
  return Tensor<T, int(R), D>::allocate(shape);
}
template <Element T, Device D, std::size_t R>
auto empty(D dev, const std::int64_t (&shape)[R]) {
  return empty<T>(dev, detail::to_shape(shape));
}

/// All zeros (a memset: no kernel).
template <Element T, Device D, std::size_t R>
Tensor<T, int(R), D> zeros(D, const std::array<std::int64_t, R>& shape) {
  Tensor<T, int(R), D> out = Tensor<T, int(R), D>::allocate(shape);
  const std::size_t bytes = static_cast<std::size_t>(out.numel()) * sizeof(T);
  if constexpr (D::is_cuda) {
#if defined(ET_HAS_CUDA_RUNTIME)
    const detail::CudaCall call(D::index, "zeros");
    if (bytes) ET_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, bytes, call.stream()));
#endif
  } else if (bytes) {
    std::memset(static_cast<void*>(out.data()), 0, bytes);
  }
  return out;
}
template <Element T, Device D, std::size_t R>
auto zeros(D dev, const std::int64_t (&shape)[R]) {
  return zeros<T>(dev, detail::to_shape(shape));
}

/// The index along `axis` of every element of `shape`, as T: NumPy's np.indices(shape)[axis]
/// (torch.meshgrid of aranges, indexing='ij'), lazy: an expression that reads no memory and is
/// computed by the kernel that reads it. Grids and coordinates without host loops:
///   auto x = et::index_grid<float>(dev, {ny, nx}, 1) * dx;      // x coordinate of each point
/// Throws ShapeError for an axis out of range or a negative extent.
template <Element T, Device D, std::size_t R>
detail::GeneratorExpr<detail::IndexGridGenerator<T>, int(R), D> index_grid(D, const std::array<std::int64_t, R>& shape,
                                                                            int axis) {
  static_assert(R >= 1, "et: index_grid needs a shape of rank 1 or more");
  const int a = detail::normalize_axis(axis, int(R), "index_grid", format_shape(shape));
  detail::checked_numel(shape);
  std::int64_t stride = 1;
  for (int d = int(R) - 1; d > a; --d) stride *= std::max<std::int64_t>(shape[std::size_t(d)], 1);
  return {detail::IndexGridGenerator<T>{stride, std::max<std::int64_t>(shape[std::size_t(a)], 1)}, shape};
}
template <Element T, Device D, std::size_t R>
auto index_grid(D dev, const std::int64_t (&shape)[R], int axis) {
  return index_grid<T>(dev, detail::to_shape(shape), axis);
}

/// Every element equal to value (converted to T; for half and bfloat16 rounded once).
template <Element T, Device D, std::size_t R, Scalar S>
Tensor<T, int(R), D> full(D, const std::array<std::int64_t, R>& shape, S value) {
  const T converted = detail::scalar_as<T>(value, "full");  // before allocating
  Tensor<T, int(R), D> out = Tensor<T, int(R), D>::allocate(shape);
  out = converted;
  return out;
}
template <Element T, Device D, std::size_t R, Scalar S>
auto full(D dev, const std::int64_t (&shape)[R], S value) {
  return full<T>(dev, detail::to_shape(shape), value);
}

template <Element T, Device D, std::size_t R>
Tensor<T, int(R), D> ones(D dev, const std::array<std::int64_t, R>& shape) {
  return full<T>(dev, shape, 1);
}
template <Element T, Device D, std::size_t R>
auto ones(D dev, const std::int64_t (&shape)[R]) {
  return ones<T>(dev, detail::to_shape(shape));
}

/// A 0-d tensor holding `value` (a device scalar: alpha and the dot products of a solver
/// stay on the device, read by expressions there, never waiting for the host).
template <Element T, Device D, Scalar S = int>
Tensor<T, 0, D> scalar(D dev, S value = 0) {
  return full<T>(dev, Shape<0>{}, value);
}

/// start, start + step, ... up to but excluding end: ceil((end - start) / step) elements.
/// Throws et::Error for a zero or non-finite step, ShapeError for a negative count.
template <Element T, Device D>
Tensor<T, 1, D> arange(D, double start, double end, double step = 1) {
  detail::check_finite(start, "arange start");
  detail::check_finite(end, "arange end");
  detail::check_finite(step, "arange step");
  if (step == 0) throw Error("et: arange step must not be zero");
  const double count = std::ceil((end - start) / step);
  if (count < 0 || count > 9.0e18) {
    char text[200];
    std::snprintf(text, sizeof text, "et: arange(%.17g, %.17g, %.17g) would have %.6g elements", start, end, step,
                  count);
    throw ShapeError(text);
  }
  if (count > 0) {  // an integer tensor must hold the first and the last value
    (void)detail::scalar_as<T>(start, "arange start");
    (void)detail::scalar_as<T>(start + (count - 1) * step, "arange's last value");
  }
  using Gen = detail::RangeGenerator<T>;
  return detail::generate<T, 1, D>(Shape<1>{static_cast<std::int64_t>(count)},
                                   Gen{static_cast<typename Gen::Accumulate>(start),
                                       static_cast<typename Gen::Accumulate>(step)});
}
/// 0, 1, ..., n - 1.
template <Element T, Device D>
Tensor<T, 1, D> arange(D, std::int64_t n) {
  if (n < 0) throw ShapeError("et: arange needs a non-negative count, got " + std::to_string(n));
  using Gen = detail::RangeGenerator<T>;
  return detail::generate<T, 1, D>(Shape<1>{n}, Gen{0, 1});
}

/// n evenly spaced values from a to b inclusive (n == 1 gives a).
template <Element T, Device D>
Tensor<T, 1, D> linspace(D, double a, double b, std::int64_t n) {
  detail::check_finite(a, "linspace start");
  detail::check_finite(b, "linspace end");
  if (n < 0) throw ShapeError("et: linspace needs a non-negative count, got " + std::to_string(n));
  const double step = n > 1 ? (b - a) / static_cast<double>(n - 1) : 0.0;
  return detail::generate<T, 1, D>(Shape<1>{n}, detail::LinspaceGenerator<T>{a, b, step, n});
}

/// Uniform on [0, 1). Element i depends only on (seed, i): identical on every device.
/// half and bfloat16 draw 11 and 8 random bits (as PyTorch does), so every value is exact.
template <Element T, Device D, std::size_t R>
Tensor<T, int(R), D> rand(D, const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  return detail::generate<T, int(R), D>(shape, detail::UniformGenerator<T>{seed});
}
template <Element T, Device D, std::size_t R>
auto rand(D dev, const std::int64_t (&shape)[R], std::uint64_t seed) {
  return rand<T>(dev, detail::to_shape(shape), seed);
}

/// Standard normal. Element i depends only on (seed, i): bit-identical on every device.
/// Computed in double and rounded once to T.
template <Element T, Device D, std::size_t R>
Tensor<T, int(R), D> randn(D, const std::array<std::int64_t, R>& shape, std::uint64_t seed) {
  return detail::generate<T, int(R), D>(shape, detail::NormalGenerator<T>{seed});
}
template <Element T, Device D, std::size_t R>
auto randn(D dev, const std::int64_t (&shape)[R], std::uint64_t seed) {
  return randn<T>(dev, detail::to_shape(shape), seed);
}

/// Host data in (row-major), any device out. Throws ShapeError if the vector's size
/// differs from the shape's element count.
template <Device D, Element T, std::size_t R>
Tensor<T, int(R), D> from_vector(D, const std::vector<T>& values, const std::array<std::int64_t, R>& shape) {
  Tensor<T, int(R), D> out = Tensor<T, int(R), D>::allocate(shape);
  if (static_cast<std::int64_t>(values.size()) != out.numel())
    throw ShapeError("et: from_vector got " + std::to_string(values.size()) + " values for shape " +
                     format_shape(shape) + " (" + std::to_string(out.numel()) + " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    const std::vector<unsigned char> bytes(values.begin(), values.end());
    detail::copy_bytes(D::index, out.data(), -1, bytes.data(), bytes.size());
  } else {
    detail::copy_bytes(D::index, out.data(), -1, values.data(), values.size() * sizeof(T));
  }
  return out;
}
template <Device D, Element T, std::size_t R>
auto from_vector(D dev, const std::vector<T>& values, const std::int64_t (&shape)[R]) {
  return from_vector(dev, values, detail::to_shape(shape));
}
/// A 1-D tensor of the vector's values.
template <Device D, Element T>
Tensor<T, 1, D> from_vector(D dev, const std::vector<T>& values) {
  return from_vector(dev, values, Shape<1>{static_cast<std::int64_t>(values.size())});
}

}  // namespace et
