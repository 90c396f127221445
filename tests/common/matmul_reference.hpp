// Test helpers for matrix products (tests/cpu/test_matmul.cpp, tests/gpu/test_matmul.cu):
// a double-precision triple loop with batch broadcasting, and a check of every element
// against it on the scale of the sum it is, sum_k |a_ik b_kj| (the scale a rounding error
// of the product is proportional to).
#pragma once

#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "random_values.hpp"

namespace test {

/// A rank-2 or rank-3 tensor copied to the host as doubles, seen as [batch, rows, cols].
struct HostMatrices {
  std::int64_t batch = 1, rows = 0, cols = 0;
  std::vector<double> values;
  /// Matrix b of the batch (a batch of 1 broadcasts).
  double at(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return values[static_cast<std::size_t>(((batch == 1 ? 0 : b) * rows + i) * cols + j)];
  }
};

/// Any element type (half and bfloat16 through float, exactly) as a double.
template <class T>
double as_double(const T& v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return static_cast<double>(static_cast<float>(v));
}

template <class T, int R, class D>
HostMatrices host_matrices(const et::Tensor<T, R, D>& t) {
  static_assert(R == 2 || R == 3);
  HostMatrices m;
  m.batch = R == 3 ? t.shape()[0] : 1;
  m.rows = t.shape()[R - 2];
  m.cols = t.shape()[R - 1];
  for (const T& v : t.to_vector()) m.values.push_back(as_double(v));
  return m;
}

/// The exact product (in double) and, per element, sum_k |a_ik b_kj|.
struct Product {
  std::int64_t batch = 1, rows = 0, cols = 0;
  std::vector<double> value, scale;
};

inline Product reference_product(const HostMatrices& a, const HostMatrices& b) {
  Product p;
  p.batch = a.batch == 1 ? b.batch : a.batch;  // a batch of 1 broadcasts (to 0 too)
  p.rows = a.rows;
  p.cols = b.cols;
  for (std::int64_t n = 0; n < p.batch; ++n)
    for (std::int64_t i = 0; i < a.rows; ++i)
      for (std::int64_t j = 0; j < b.cols; ++j) {
        double sum = 0, magnitude = 0;
        for (std::int64_t k = 0; k < a.cols; ++k) {
          sum += a.at(n, i, k) * b.at(n, k, j);
          magnitude += std::fabs(a.at(n, i, k) * b.at(n, k, j));
        }
        p.value.push_back(sum);
        p.scale.push_back(magnitude);
      }
  return p;
}

/// f(product + bias[j]) per element (the unfused meaning of an epilogue); bias may be empty.
inline Product apply(const Product& p, const std::vector<double>& bias, const std::function<double(double)>& f) {
  Product out = p;
  for (std::size_t e = 0; e < p.value.size(); ++e) {
    const double b = bias.empty() ? 0.0 : bias[e % static_cast<std::size_t>(p.cols)];
    out.value[e] = f(p.value[e] + b);
    out.scale[e] = p.scale[e] + std::fabs(b);
  }
  return out;
}

inline double relu(double x) { return x < 0 ? 0 : x; }
inline double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
inline double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x * 0.70710678118654752440)); }

/// The first element with |got - want| > tolerance * scale (Half's subnormals are spaced
/// 2^-24 apart: no relative tolerance reaches below that), or -1 when there is none.
template <class T>
std::int64_t first_product_miss(const std::vector<T>& got_values, const Product& want, double tolerance) {
  const double floor = std::is_same_v<T, et::half> ? 0x1p-24 : 0.0;
  for (std::size_t e = 0; e < got_values.size(); ++e)
    if (!(std::fabs(as_double(got_values[e]) - want.value[e]) <= tolerance * want.scale[e] + floor))
      return static_cast<std::int64_t>(e);
  return -1;
}

/// |got - want| <= tolerance * scale for every element; reports the first miss.
template <class T>
void check_product(const std::vector<T>& got_values, const Product& want, double tolerance) {
  REQUIRE(got_values.size() == want.value.size());
  if (const std::int64_t index = first_product_miss(got_values, want, tolerance); index >= 0) {
    const auto e = static_cast<std::size_t>(index);
    const std::int64_t per_matrix = want.rows * want.cols;
    const double got = as_double(got_values[e]);
    CAPTURE(index / per_matrix, index % per_matrix / want.cols, index % want.cols, got, want.value[e],
            want.scale[e], tolerance);
    FAIL("element differs from the double-precision product");
  }
}

/// Seeded uniform values in [-1, 1) as T (a floating type).
template <class T>
std::vector<T> uniform(std::size_t n, std::uint64_t seed) {
  return random_values<T>(n, seed, -1.0, 1.0);
}

/// How an operand is laid out in memory (its values are the same either way).
enum class Layout {
  contiguous,
  transposed,   ///< the matrices stored transposed: a transpose(-2, -1) view (a transpose flag)
  row_slice,    ///< columns 2 .. 2 + cols of wider rows (a leading dimension and an offset)
  stepped,      ///< every second column: no BLAS layout, so it must be copied
  batch_inner,  ///< rank 3 only: the batch axis inside the rows (a batch stride below the matrix size)
};

inline const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous: return "contiguous";
    case Layout::transposed: return "transposed";
    case Layout::row_slice: return "row_slice";
    case Layout::stepped: return "stepped";
    case Layout::batch_inner: return "batch_inner";
  }
  return "?";
}

/// A CPU tensor of logical shape `shape` holding `values` (row-major), laid out as asked;
/// memory the view skips holds NaN, so a read outside the view shows in the result.
template <class T, std::size_t R>
et::Tensor<T, int(R), et::Cpu> laid_out(const std::vector<T>& values, const std::array<std::int64_t, R>& shape,
                                        Layout layout) {
  constexpr int last = int(R) - 1;
  const auto logical = et::from_vector(et::cpu, values, shape);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto storage_shape = shape;
  switch (layout) {
    case Layout::contiguous:
      return logical;
    case Layout::transposed: {
      std::swap(storage_shape[R - 2], storage_shape[R - 1]);
      auto view = et::full<T>(et::cpu, storage_shape, nan).transpose(last - 1, last);
      view.copy_(logical);
      return view;
    }
    case Layout::row_slice: {
      storage_shape[R - 1] += 5;
      auto view = et::full<T>(et::cpu, storage_shape, nan).slice(last, 2, 2 + shape[R - 1]);
      view.copy_(logical);
      return view;
    }
    case Layout::stepped: {
      storage_shape[R - 1] *= 2;
      auto view = et::full<T>(et::cpu, storage_shape, nan).slice(last, 0, 2 * shape[R - 1], 2);
      view.copy_(logical);
      return view;
    }
    case Layout::batch_inner: {
      if constexpr (R == 3) {
        const std::array<std::int64_t, 3> rows_outside{shape[1], shape[0], shape[2]};
        auto view = et::full<T>(et::cpu, rows_outside, nan).permute({1, 0, 2});
        view.copy_(logical);
        return view;
      }
      break;
    }
  }
  return logical;
}

/// Whether a rows x cols operand in this layout has no BLAS layout (must be copied): a
/// stepped slice does, unless one of its axes has extent 1.
inline bool needs_copy(Layout layout, std::int64_t rows, std::int64_t cols) {
  return layout == Layout::stepped && rows > 1 && cols > 1;
}

/// Relative tolerance of a product of element type T (output rounding plus float
/// accumulation), on the sum_k |a b| scale.
template <class T>
constexpr double product_tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, et::half>) return 2e-3;
  else return 1e-2;
}

}  // namespace test
