// The row operations softmax, log_softmax and logsumexp in one pass over each row: the
// arithmetic shared by the CUDA kernel (kernels/et/kernels/softmax.cuh) and the CPU loop
// (backend/cpu/softmax.hpp). A row's statistics are its maximum m and the sum s of
// exp(x - shift(m)); a running sum is rescaled when a larger maximum comes (the "online
// softmax" of Milakov and Gimelshein, 2018), so a row is read once for them and once more
// for the output, or only once where it fits in registers.
//
// Special values follow PyTorch: NaN anywhere in a row makes its results NaN; a row of -inf
// has logsumexp -inf and softmax NaN; +inf in a row makes its softmax NaN and its
// logsumexp +inf. -inf elements contribute exactly 0.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "et/config.hpp"
#include "et/expr/functors.hpp"

namespace et::detail {

/// The accumulator of a row: float for float, half and bfloat16, double for double.
template <class T>
using softmax_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// softmax and log_softmax write a row per row; logsumexp one value per row. `finite_shift`:
/// an infinite maximum is not subtracted (logsumexp of a row with +inf is +inf, not NaN).
struct SoftmaxKind {
  static constexpr bool per_element = true, finite_shift = false;
  static constexpr const char* name = "softmax";
};
struct LogSoftmaxKind {
  static constexpr bool per_element = true, finite_shift = true;
  static constexpr const char* name = "log_softmax";
};
struct LogSumExpKind {
  static constexpr bool per_element = false, finite_shift = true;
  static constexpr const char* name = "logsumexp";
};

template <class Kind, class Acc>
struct RowStats {
  Acc max = -std::numeric_limits<Acc>::infinity();
  Acc sum = 0;  // of exp(x - shift(max))

  ET_HD static Acc shift(Acc m) {
    if constexpr (Kind::finite_shift) return m - m == Acc(0) ? m : Acc(0);
    else return m;
  }
  /// exp(x - shift), exactly 0 for x = -inf (also when the shift is -inf).
  ET_HD static Acc term(Acc x, Acc shift) {
    return x == -std::numeric_limits<Acc>::infinity() ? Acc(0) : math::exp(x - shift);
  }
  /// The same where the shift is not -inf: exp(-inf - shift) is 0 by itself.
  ET_HD static Acc finite_term(Acc x, Acc shift) { return math::exp(x - shift); }
  /// This sum rescaled to the shift of a larger maximum.
  ET_HD Acc sum_at(Acc new_shift) const {
    const Acc own = shift(max);
    return own == new_shift || sum == Acc(0) ? sum : sum * math::exp(own - new_shift);
  }
  /// Adds n values, all at once: one rescale, then a term each. KeepTerms: each value is
  /// replaced by its term (softmax's output is the term times a factor of the row).
  /// The maximum ignores NaN (fmax): a NaN reaches the sum through its term instead, and
  /// makes every result of its row NaN from there.
  template <bool KeepTerms = false, int N>
  ET_HD void add(Acc (&values)[N]) {
    Acc m = max;
    ET_UNROLL
    for (int k = 0; k < N; ++k) m = math::fmax(m, values[k]);
    const Acc s = shift(m);
    Acc total = sum_at(s);
    auto fold = [&](auto term_of) {
      ET_UNROLL
      for (int k = 0; k < N; ++k) {
        const Acc t = term_of(values[k], s);
        total += t;
        if constexpr (KeepTerms) values[k] = t;
      }
    };
    if (s == -std::numeric_limits<Acc>::infinity())  // only -inf (and NaN) so far
      fold([](Acc x, Acc shift) { return term(x, shift); });
    else
      fold([](Acc x, Acc shift) { return finite_term(x, shift); });
    max = m;
    sum = total;
  }
  /// logsumexp of the row; log(0) = -inf for a row of -inf.
  ET_HD Acc log_sum() const { return shift(max) + math::log(sum); }

  /// The output for the elements of a finished row (softmax, log_softmax), from what is
  /// computed once per row: a multiplication by 1 / sum rather than a division each.
  struct Output {
    Acc shift, inverse_sum, log_sum;
    ET_HD Acc operator()(Acc x) const {
      if constexpr (std::is_same_v<Kind, SoftmaxKind>) return term(x, shift) * inverse_sum;
      else return x - log_sum;
    }
  };
  ET_HD Output output() const { return {shift(max), Acc(1) / sum, log_sum()}; }
};

/// Rows of a strided tensor: the reduced axis (length elements, `in_step` / `out_step`
/// apart) and the other R1 axes, row-major, whose coordinates locate a row's first
/// element in the input and the output.
template <int R1>
struct RowsGeometry {
  std::int64_t rows = 1, length = 0, in_step = 1, out_step = 1;
  std::int64_t extents[R1 > 0 ? R1 : 1] = {};
  std::int64_t in_strides[R1 > 0 ? R1 : 1] = {};
  std::int64_t out_strides[R1 > 0 ? R1 : 1] = {};

  /// Offsets of row `row`'s first element in the input and the output.
  ET_HD void offsets(std::int64_t row, std::int64_t& in, std::int64_t& out) const {
    in = 0;
    out = 0;
    for (int d = R1 - 1; d > 0; --d) {
      const std::int64_t c = row % extents[d];
      row /= extents[d];
      in += c * in_strides[d];
      out += c * out_strides[d];
    }
    if constexpr (R1 > 0) {  // what is left of row is the outermost coordinate: no division
      in += row * in_strides[0];
      out += row * out_strides[0];
    }
  }
};

}  // namespace et::detail
