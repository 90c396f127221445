// Randomized differential tests of views (random_cases.hpp has the machinery): chains of
// one to four random steps (permute, transpose, stepped and negative-bounded slices,
// select then unsqueeze, unsqueeze then squeeze, expand, reshape, contiguous) on a rank-3
// tensor of random extents (0, 1, odd, up to 7), in six element types. The reference
// follows each step on the list of the base's element numbers that the view reads, with
// index arithmetic of its own, and the rule for writing (an axis of extent > 1 that
// expand() stretched overlaps, unless the view has no elements; every other view can be
// written, and the writes reach the base). Each case checks the shape, every element
// read, and, unless a step copied, a write through the view (copy_() or an expression):
// into the base (every element, the untouched ones included), or the et::Error of an
// overlapping destination. Shared by the CPU and GPU tests.
#pragma once

#include "random_cases.hpp"

#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace test {

/// What a view reads: the base element number at each of its elements (row-major), its
/// shape, which axes expand() stretched (stride 0), and whether a step copied.
struct ViewModel {
  RShape shape{};
  std::vector<std::int64_t> ids;
  std::array<bool, 3> stretched{};
  bool copied = false;

  /// The model of the view whose element at index j reads this model's element at from(j).
  template <class From>
  ViewModel mapped(const RShape& to_shape, From from) const {
    ViewModel out;
    out.shape = to_shape;
    out.copied = copied;
    out.ids.reserve(static_cast<std::size_t>(count_of(to_shape)));
    RShape j{};
    for (j[0] = 0; j[0] < to_shape[0]; ++j[0])
      for (j[1] = 0; j[1] < to_shape[1]; ++j[1])
        for (j[2] = 0; j[2] < to_shape[2]; ++j[2]) {
          const RShape i = from(j);
          out.ids.push_back(ids[static_cast<std::size_t>((i[0] * shape[1] + i[1]) * shape[2] + i[2])]);
        }
    return out;
  }
  bool overlaps() const {
    for (int d = 0; d < 3; ++d)
      if (shape[d] == 0) return false;  // no elements, none that overlap
    for (int d = 0; d < 3; ++d)
      if (stretched[d] && shape[d] > 1) return true;
    return false;
  }
};

/// A value of T that stands for element number id: exact in T, distinct while T can tell.
template <class T>
T view_value(std::int64_t id) {
  if constexpr (std::is_same_v<T, et::bfloat16>) return static_cast<T>(static_cast<double>(id % 256));
  else if constexpr (std::is_same_v<T, et::half>) return static_cast<T>(static_cast<double>(id % 2048));
  else return static_cast<T>(id);
}

/// One random step on a view and its model; `what` gets the step's spelling.
template <class T, class D>
void random_view_step(et::Tensor<T, 3, D>& t, ViewModel& m, std::mt19937_64& rng, std::ostringstream& what) {
  const int a = static_cast<int>(rng() % 3), b = static_cast<int>(rng() % 3);
  const RShape s = m.shape;
  switch (rng() % 8) {
    case 0: {  // permute, axes negative at random
      std::array<int, 3> order{0, 1, 2};
      std::shuffle(order.begin(), order.end(), rng);
      std::array<int, 3> spelled = order;
      for (int& axis : spelled) axis -= rng() % 2 ? 3 : 0;
      what << ".permute({" << spelled[0] << ", " << spelled[1] << ", " << spelled[2] << "})";
      t = t.permute(spelled);
      ViewModel next = m.mapped({s[order[0]], s[order[1]], s[order[2]]}, [&](const RShape& j) {
        RShape i{};
        for (int d = 0; d < 3; ++d) i[order[d]] = j[d];
        return i;
      });
      for (int d = 0; d < 3; ++d) next.stretched[d] = m.stretched[order[d]];
      m = next;
      break;
    }
    case 1: {  // transpose
      what << ".transpose(" << a << ", " << b << ")";
      t = t.transpose(a, b);
      RShape to = s;
      std::swap(to[a], to[b]);
      ViewModel next = m.mapped(to, [&](RShape j) { return std::swap(j[a], j[b]), j; });
      next.stretched = m.stretched;
      std::swap(next.stretched[a], next.stretched[b]);
      m = next;
      break;
    }
    case 2:
    case 3: {  // slice(axis, begin, end, step), bounds sometimes counted from the end
      const std::int64_t n = s[a];
      const std::int64_t begin = static_cast<std::int64_t>(rng() % (n + 1));
      const std::int64_t end = begin + static_cast<std::int64_t>(rng() % (n - begin + 1));
      const std::int64_t step = 1 + static_cast<std::int64_t>(rng() % 3);
      const auto from_end = [&](std::int64_t bound) { return bound < n && rng() % 4 == 0 ? bound - n : bound; };
      const std::int64_t spelled_begin = from_end(begin), spelled_end = from_end(end);
      what << ".slice(" << a << ", " << spelled_begin << ", " << spelled_end << ", " << step << ")";
      t = t.slice(a, spelled_begin, spelled_end, step);
      RShape to = s;
      to[a] = (end - begin + step - 1) / step;
      ViewModel next = m.mapped(to, [&](RShape j) { return j[a] = begin + j[a] * step, j; });
      next.stretched = m.stretched;
      m = next;
      break;
    }
    case 4: {  // select(axis, index).unsqueeze(b): the axis replaced by one of extent 1
      if (s[a] == 0) return;
      const std::int64_t index = static_cast<std::int64_t>(rng() % s[a]);
      what << ".select(" << a << ", " << index << ").unsqueeze(" << b << ")";
      t = t.select(a, index).unsqueeze(b);
      std::array<int, 2> kept{};  // the axes select() keeps, in order
      for (int d = 0, k = 0; d < 3; ++d)
        if (d != a) kept[k++] = d;
      RShape to{};
      std::array<bool, 3> stretched{};
      for (int d = 0, k = 0; d < 3; ++d) {
        if (d == b) continue;
        to[d] = s[kept[k]], stretched[d] = m.stretched[kept[k]], ++k;
      }
      to[b] = 1;
      ViewModel next = m.mapped(to, [&](const RShape& j) {
        RShape i{};
        i[a] = index;
        for (int d = 0, k = 0; d < 3; ++d)
          if (d != b) i[kept[k++]] = j[d];
        return i;
      });
      next.stretched = stretched;
      m = next;
      break;
    }
    case 5: {  // unsqueeze(a).squeeze(a or a + 1): a no-op, through rank 4
      const int back = a + static_cast<int>(rng() % 2) * (s[a] == 1 ? 1 : 0);
      what << ".unsqueeze(" << a << ").squeeze(" << back << ")";
      t = t.unsqueeze(a).squeeze(back);
      break;
    }
    case 6: {  // expand: every axis of extent 1 to 0..3
      RShape to = s;
      for (int d = 0; d < 3; ++d)
        if (s[d] == 1) to[d] = static_cast<std::int64_t>(rng() % 4);
      what << ".expand(" << shape_text(to) << ")";
      t = t.expand(to);
      ViewModel next = m.mapped(to, [&](RShape j) {
        for (int d = 0; d < 3; ++d)
          if (s[d] == 1) j[d] = 0;
        return j;
      });
      for (int d = 0; d < 3; ++d) next.stretched[d] = m.stretched[d] || (s[d] == 1 && to[d] != 1);
      m = next;
      break;
    }
    default: {  // reshape to a random factorization of the count, or contiguous()
      const std::int64_t count = count_of(s);
      RShape to{1, 1, count};
      if (count == 0) to = {s[2], 0, s[0]};
      for (std::int64_t f = 2; count > 0 && f <= count; ++f)
        if (count % f == 0 && rng() % 3 == 0) to = {f, count / f, 1};
      if (to[2] == 1 && count > 1 && rng() % 2 == 0) std::swap(to[1], to[2]);
      if (rng() % 2 == 0) {
        what << ".reshape(" << shape_text(to) << ")";
        t = t.reshape(to);
        m.shape = to;  // row-major order is kept; stretched axes are gone or copied
      } else {
        what << ".contiguous()";
        t = t.contiguous();
      }
      m.copied = true;  // whether the result aliases the base depends on the strides
      break;
    }
  }
}

/// One case: a random base, a random chain of views, read and written.
template <class T, class D>
bool run_view_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 6, 7};
  ViewModel m;
  for (int d = 0; d < 3; ++d) m.shape[d] = extents[rng() % 12];
  m.ids.resize(static_cast<std::size_t>(count_of(m.shape)));
  std::iota(m.ids.begin(), m.ids.end(), std::int64_t{0});
  std::vector<T> base_values;
  for (const std::int64_t id : m.ids) base_values.push_back(view_value<T>(id));
  const auto base = et::from_vector(et::cpu, base_values, m.shape).to(dev);
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": " << type_name(T{}) << " " << shape_text(m.shape) << " ";
  auto view = base;
  const int steps = 1 + static_cast<int>(rng() % 4);
  try {
    for (int k = 0; k < steps; ++k) random_view_step(view, m, rng, what);
  } catch (const std::exception& e) {  // every step the model takes is valid
    FAIL_CHECK(what.str() << " threw: " << e.what());
    return false;
  }
  INFO(what.str());
  // Reading: the shape and every element.
  std::vector<T> want;
  for (const std::int64_t id : m.ids) want.push_back(view_value<T>(id));
  if (view.shape() != m.shape || view.to_vector() != want) {
    CHECK(shape_text(view.shape()) == shape_text(m.shape));
    CHECK(view.to_vector() == want);
    return false;
  }
  // Writing: element k of the view gets -(k + 1), through the view, by copy_() or an
  // expression. Past a reshape() or contiguous() the model does not know whether the
  // result aliases the base (that depends on the strides), so only reading is checked.
  if (m.copied) return true;
  std::vector<T> source;
  for (std::size_t k = 0; k < m.ids.size(); ++k) source.push_back(view_value<T>(-static_cast<std::int64_t>(k) - 1));
  const auto from = et::from_vector(et::cpu, source, m.shape).to(dev);
  const bool by_copy = rng() % 2 == 0;
  const auto write = [&] {
    if (by_copy) view.copy_(from);
    else view = from * 1;
  };
  if (m.overlaps()) {
    CHECK_THROWS_AS(write(), et::Error);
    return base.to_vector() == base_values;
  }
  write();
  std::vector<T> base_want = base_values;
  for (std::size_t k = 0; k < m.ids.size(); ++k) base_want[static_cast<std::size_t>(m.ids[k])] = source[k];
  if (view.to_vector() != source || base.to_vector() != base_want) {
    INFO((by_copy ? "written by copy_()" : "written by an expression"));
    CHECK(view.to_vector() == source);
    CHECK(base.to_vector() == base_want);
    return false;
  }
  return true;
}

/// The view family: six element types (the copies move 2, 4 and 8 bytes an element).
template <class D>
void run_view_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 7;
  std::mt19937_64 rng(seed);
  run_family_over<float, double, et::half, et::bfloat16, std::int32_t, std::int64_t>(
      "views", where, seed, rng, [&](auto tag, std::int64_t c) { return run_view_case<decltype(tag)>(dev, rng, seed, c); });
}

}  // namespace test
