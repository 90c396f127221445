// Randomized differential tests of the indexing family (random_cases.hpp has the others
// and the machinery): gather, index_select, flip, cumsum and sort along a random axis of a
// random shape and layout (extents 0, 1, odd), random indices (repeats, empty), in the four
// floating types, against references written from the definitions over the operand's
// double values. Shared by the CPU tests and the GPU tests (which define ET_WITH_CUB).
#pragma once

#include "random_cases.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace test {

/// One case of one operation; `what` names it for failures. False when it failed.
template <class T, class D>
bool run_index_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 3, 4, 5, 5, 7, 8, 9, 11, 13};
  RShape shape{};
  for (int d = 0; d < 3; ++d) shape[d] = extents[rng() % 14];
  const auto x = random_operand<T>(dev, shape, rng);
  const int axis = static_cast<int>(rng() % 3);
  const int op = static_cast<int>(rng() % 5);
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": " << type_name(T{}) << " " << shape_text(shape) << " "
       << x.layout << ", axis " << axis << ", ";
  const double tolerance = random_tolerance<T>();
  std::vector<double> want;
  std::vector<T> got;
  std::vector<std::int64_t> got_indices;
  RShape out_shape = shape;
  auto draw_indices = [&](std::int64_t count) {
    std::vector<std::int64_t> picks(static_cast<std::size_t>(count));
    for (auto& p : picks) p = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(shape[axis]));
    return picks;
  };
  if (op == 0 || op == 1) {  // gather / index_select
    const std::int64_t length = shape[axis] == 0 ? 0 : static_cast<std::int64_t>(rng() % 6);
    out_shape[axis] = length;
    std::vector<std::int64_t> picks;
    if (op == 0) {
      picks = draw_indices(count_of(out_shape));
      const auto idx = et::from_vector(et::cpu, picks, out_shape).to(dev);
      what << "gather of " << length;
      got = et::gather(x.tensor, axis, idx).to_vector();
    } else {
      picks = draw_indices(length);
      const auto idx = et::from_vector(et::cpu, picks, std::array<std::int64_t, 1>{length}).to(dev);
      what << "index_select of " << length;
      got = et::index_select(x.tensor, axis, idx).to_vector();
    }
    for_each_index(out_shape, [&](const RShape& i) {
      RShape from = i;
      from[axis] = picks[static_cast<std::size_t>(op == 0 ? offset_of(out_shape, i) : i[axis])];
      want.push_back(x.values[static_cast<std::size_t>(offset_of(shape, from))]);
    });
  } else if (op == 2) {  // flip along a random non-empty set of axes
    const unsigned mask = 1 + static_cast<unsigned>(rng() % 7);
    std::vector<int> axes;
    for (int d = 0; d < 3; ++d)
      if (mask & (1u << d)) axes.push_back(d);
    what << "flip of mask " << mask;
    got = (axes.size() == 1   ? et::flip(x.tensor, {axes[0]})
           : axes.size() == 2 ? et::flip(x.tensor, {axes[0], axes[1]})
                              : et::flip(x.tensor, {0, 1, 2}))
              .to_vector();
    for_each_index(shape, [&](const RShape& i) {
      RShape from = i;
      for (int d : axes) from[d] = shape[d] - 1 - i[d];
      want.push_back(x.values[static_cast<std::size_t>(offset_of(shape, from))]);
    });
  } else if (op == 3) {  // cumsum: sums of up to 13 values of |v| <= 3
    what << "cumsum";
    got = et::cumsum(x.tensor, axis).to_vector();
    for_each_index(shape, [&](const RShape& i) {
      double sum = 0;
      RShape j = i;
      for (j[axis] = 0; j[axis] <= i[axis]; ++j[axis]) sum += x.values[static_cast<std::size_t>(offset_of(shape, j))];
      want.push_back(sum);
    });
  } else {  // sort: values exactly; each index points at its value; equal values keep their order
    const bool descending = rng() % 2 == 0;
    what << "sort" << (descending ? " descending" : "");
    const auto sorted = et::sort(x.tensor, axis, descending);
    got = sorted.values.to_vector();
    got_indices = sorted.indices.to_vector();
    for_each_index(shape, [&](const RShape& i) {
      if (i[axis] != 0) return;
      std::vector<double> row;
      RShape j = i;
      for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis])
        row.push_back(x.values[static_cast<std::size_t>(offset_of(shape, j))]);
      std::stable_sort(row.begin(), row.end(), [&](double a, double b) { return descending ? b < a : a < b; });
      for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis]) want.push_back(row[static_cast<std::size_t>(j[axis])]);
    });
    // want is in row order along the axis; put it in the output's row-major order.
    std::vector<double> laid(want.size());
    std::size_t k = 0;
    for_each_index(shape, [&](const RShape& i) {
      if (i[axis] != 0) return;
      RShape j = i;
      for (j[axis] = 0; j[axis] < shape[axis]; ++j[axis]) laid[static_cast<std::size_t>(offset_of(shape, j))] = want[k++];
    });
    want = laid;
    for_each_index(shape, [&](const RShape& i) {
      const std::size_t at = static_cast<std::size_t>(offset_of(shape, i));
      RShape from = i;
      from[axis] = got_indices[at];
      const bool points = from[axis] >= 0 && from[axis] < shape[axis] &&
                          x.values[static_cast<std::size_t>(offset_of(shape, from))] == want[at];
      bool stable = true;
      if (i[axis] > 0) {
        RShape before = i;
        --before[axis];
        const std::size_t b = static_cast<std::size_t>(offset_of(shape, before));
        stable = want[b] != want[at] || got_indices[b] < got_indices[at];
      }
      if (!points || !stable) want[at] = std::numeric_limits<double>::quiet_NaN();  // reported below
    });
  }
  std::size_t wrong = 0, first = 0;
  for (std::size_t k = 0; k < want.size(); ++k)
    if (k >= got.size() || !close(static_cast<double>(got[k]), want[k], op == 3 ? 4 * tolerance : tolerance))
      if (wrong++ == 0) first = k;
  if (wrong != 0 || got.size() != want.size()) {
    INFO(what.str() << ": " << wrong << " wrong, the first at " << first << "; " << got.size() << " values, "
                    << want.size() << " expected");
    CHECK(wrong == 0);
    CHECK(got.size() == want.size());
    return false;
  }
  return true;
}

/// The indexing family: gather, index_select, flip, cumsum and sort, the four floating types.
template <class D>
void run_index_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 2;
  std::mt19937_64 rng(seed);
  run_family("indexing", where, seed, rng,
             [&](auto tag, std::int64_t c) { return run_index_case<decltype(tag)>(dev, rng, seed, c); });
}

}  // namespace test
