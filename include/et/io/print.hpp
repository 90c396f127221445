// Printing tensors: `std::cout << t` and et::to_string(t, options), in the style of
// PyTorch's repr, plus the shape, dtype and device:
//
//   tensor([[ 0.5000, -1.2500,  3.0000],
//           [ 2.0000,  0.0000, -7.5000]], shape=[2, 3], dtype=float32, device=cuda:0)
//
// Floating values print with `precision` digits after the point, or in scientific notation
// where the magnitudes they span need it (largest / smallest nonzero above 1000, largest
// at or above 1e8, smallest below 1e-4), or as "3." where every value is a whole number;
// integers as they are, bool as True / False; every column one width. A tensor of more
// than `threshold` elements is summarized: each axis longer than 2 * edge_items shows its
// first and last edge_items, "..." between. Only what is shown leaves the device (one copy
// per block of shown elements). Works for every device; a lazy expression prints after
// et::eval.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "et/device.hpp"
#include "et/layout.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"

namespace et {

struct PrintOptions {
  int precision = 4;              ///< digits after the point (or of a scientific mantissa)
  std::int64_t threshold = 1000;  ///< tensors with more elements are summarized
  std::int64_t edge_items = 3;    ///< elements shown at each end of a summarized axis
  int line_width = 80;            ///< a row wraps beyond this many characters
};

namespace detail::print {

/// The shown elements gathered to the host, row-major over the shown indices; `cut[d]`:
/// axis d shows edge_items at each end with "..." between them.
template <class T, int R>
struct Shown {
  std::array<std::int64_t, R> extents{};
  std::array<bool, R> cut{};
  std::vector<T> values;
};

template <class T, int R, class D>
Shown<T, R> gather(const Tensor<T, R, D>& t, const PrintOptions& options) {
  Shown<T, R> shown;
  const std::int64_t edge = std::max<std::int64_t>(options.edge_items, 1);
  const bool summarize = t.numel() > options.threshold;
  for (int d = 0; d < R; ++d) {
    shown.cut[d] = summarize && t.size(d) > 2 * edge;
    shown.extents[d] = shown.cut[d] ? 2 * edge : t.size(d);
  }
  const Tensor<T, R, D> base = t.detach();  // views made here record nothing
  int cut_axes = 0;
  for (int d = 0; d < R; ++d) cut_axes += shown.cut[d] ? 1 : 0;
  if (cut_axes == 0) {
    shown.values = base.to_vector();
    return shown;
  }
  std::int64_t count = 1;
  for (int d = 0; d < R; ++d) count *= shown.extents[d];
  shown.values.resize(static_cast<std::size_t>(count));
  // One block per choice of end (first or last edge_items) on each cut axis.
  for (unsigned choice = 0; choice < (1u << cut_axes); ++choice) {
    Tensor<T, R, D> block = base;
    std::array<std::int64_t, R> origin{};
    for (int d = 0, bit = 0; d < R; ++d) {
      if (!shown.cut[d]) continue;
      const bool last = (choice >> bit++) & 1u;
      const std::int64_t n = t.size(d);
      block = block.slice(d, last ? n - edge : 0, last ? n : edge);
      origin[d] = last ? edge : 0;
    }
    const std::vector<T> values = block.to_vector();
    // Scatter the block (row-major over its own shape) into the shown grid.
    std::array<std::int64_t, R> index{};
    for (const T& value : values) {
      std::int64_t at = 0;
      for (int d = 0; d < R; ++d) at = at * shown.extents[d] + origin[d] + index[d];
      shown.values[static_cast<std::size_t>(at)] = value;
      for (int d = R - 1; d >= 0; --d) {
        if (++index[d] < block.size(d)) break;
        index[d] = 0;
      }
    }
  }
  return shown;
}

/// Every shown value as text, one format for all (see the header comment).
template <class T>
std::vector<std::string> format_values(const std::vector<T>& values, const PrintOptions& options) {
  std::vector<std::string> text;
  text.reserve(values.size());
  char buffer[64];
  if constexpr (std::is_same_v<T, bool>) {
    for (const bool v : values) text.emplace_back(v ? "True" : "False");
  } else if constexpr (std::is_integral_v<T>) {
    for (const T v : values) text.push_back(std::to_string(v));
  } else {
    double largest = 0, smallest = 0;
    bool whole = true, any = false;
    for (const T v : values) {
      const double x = std::fabs(static_cast<double>(v));
      if (!std::isfinite(x) || x == 0) continue;
      largest = any ? std::max(largest, x) : x;
      smallest = any ? std::min(smallest, x) : x;
      any = true;
      whole = whole && std::nearbyint(x) == x;
    }
    const int digits = std::clamp(options.precision, 0, 30);
    const bool scientific = any && (largest >= 1e8 || (!whole && (largest / smallest > 1000 || smallest < 1e-4)));
    for (const T v : values) {
      const double x = static_cast<double>(v);
      if (std::isnan(x)) text.emplace_back("nan");
      else if (std::isinf(x)) text.emplace_back(x > 0 ? "inf" : "-inf");
      else if (scientific) text.emplace_back(buffer, std::snprintf(buffer, sizeof buffer, "%.*e", digits, x));
      else if (whole) text.emplace_back(buffer, std::snprintf(buffer, sizeof buffer, "%.0f.", x));
      else text.emplace_back(buffer, std::snprintf(buffer, sizeof buffer, "%.*f", digits, x));
    }
  }
  return text;
}

/// Writes the nested brackets of axis `axis` from flat position `at` (of shown.values).
template <class T, int R>
void write_axis(std::ostream& out, const Shown<T, R>& shown, const std::vector<std::string>& text, std::size_t width,
                const PrintOptions& options, int axis, std::int64_t at, int indent) {
  const std::int64_t extent = shown.extents[axis];
  std::int64_t stride = 1;
  for (int d = axis + 1; d < R; ++d) stride *= shown.extents[d];
  const std::int64_t edge = extent / 2;
  out << '[';
  if (axis == R - 1) {
    const std::size_t per_line =
        std::max<std::size_t>(1, (static_cast<std::size_t>(std::max(options.line_width - indent, 1))) / (width + 2));
    std::size_t on_line = 0;
    for (std::int64_t i = 0; i < extent; ++i) {
      if (i > 0) {
        out << ',';
        if (++on_line == per_line) {
          out << '\n' << std::string(static_cast<std::size_t>(indent + 1), ' ');
          on_line = 0;
        } else {
          out << ' ';
        }
      }
      if (shown.cut[axis] && i == edge) {
        out << "...,";
        out << ' ';
      }
      const std::string& value = text[static_cast<std::size_t>(at + i)];
      out << std::string(width - value.size(), ' ') << value;
    }
  } else {
    const std::string gap = "," + std::string(static_cast<std::size_t>(R - 1 - axis), '\n') +
                            std::string(static_cast<std::size_t>(indent + 1), ' ');
    for (std::int64_t i = 0; i < extent; ++i) {
      if (i > 0) out << gap;
      if (shown.cut[axis] && i == edge) out << "..." << gap;
      write_axis(out, shown, text, width, options, axis + 1, at + i * stride, indent + 1);
    }
  }
  out << ']';
}

}  // namespace detail::print

/// The tensor as text (see the top of this file); an undefined tensor prints as
/// "tensor(undefined, dtype=..., device=...)".
template <class T, int R, class D>
std::string to_string(const Tensor<T, R, D>& t, const PrintOptions& options = {}) {
  std::ostringstream out;
  out << "tensor(";
  if (!t.defined()) {
    out << "undefined";
  } else {
    const detail::print::Shown<T, R> shown = detail::print::gather(t, options);
    const std::vector<std::string> text = detail::print::format_values(shown.values, options);
    std::size_t width = 0;
    for (const std::string& s : text) width = std::max(width, s.size());
    if constexpr (R == 0) {
      out << text.front();
    } else {
      detail::print::write_axis(out, shown, text, width, options, 0, 0, static_cast<int>(sizeof("tensor(") - 1));
    }
    out << ", shape=" << format_shape(t.shape());
  }
  out << ", dtype=" << dtype_name<T> << ", device=" << device_name<D>.view() << ')';
  return out.str();
}

template <class T, int R, class D>
std::ostream& operator<<(std::ostream& out, const Tensor<T, R, D>& t) {
  return out << to_string(t);
}

}  // namespace et
