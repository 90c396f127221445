// No-copy views on the CPU: layouts (shape, strides, offset) and values against a host
// reference built from coordinates alone (never from strides), shared storage, views of
// views, write-through, aliasing, and the messages of bad input.
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::Message;
using et::Shape;
using test::random_values;

namespace {

using Extents = std::vector<std::int64_t>;

std::int64_t count_of(const Extents& shape) {
  std::int64_t count = 1;
  for (auto extent : shape) count *= extent;
  return count;
}

template <std::size_t R>
Extents extents_of(const std::array<std::int64_t, R>& shape) {
  return Extents(shape.begin(), shape.end());
}

/// Calls f(coordinate) for every coordinate of `shape`, in row-major order.
template <class F>
void for_each_coordinate(const Extents& shape, F f) {
  Extents c(shape.size(), 0);
  for (std::int64_t i = 0, n = count_of(shape); i < n; ++i) {
    f(c);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
}

std::int64_t row_major_index(const Extents& shape, const Extents& c) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d != shape.size(); ++d) index = index * shape[d] + c[d];
  return index;
}

/// The host reference of a view: its shape, and for each of its elements (row-major) the
/// row-major index of the root tensor's element it reads.
struct Ref {
  Extents shape;
  std::vector<std::int64_t> source;
};

Ref identity(const Extents& shape) {
  Ref ref{shape, std::vector<std::int64_t>(static_cast<std::size_t>(count_of(shape)))};
  for (std::size_t i = 0; i < ref.source.size(); ++i) ref.source[i] = static_cast<std::int64_t>(i);
  return ref;
}

/// A reference of shape `shape` whose element at coordinate c is element to_source(c) of `from`.
template <class F>
Ref remap(const Ref& from, const Extents& shape, F to_source) {
  Ref out{shape, {}};
  for_each_coordinate(shape, [&](const Extents& c) {
    out.source.push_back(from.source[static_cast<std::size_t>(row_major_index(from.shape, to_source(c)))]);
  });
  return out;
}

Ref ref_view(const Ref& from, const Extents& shape) { return {shape, from.source}; }

Ref ref_permute(const Ref& from, const std::vector<int>& axes) {  // axes normalized
  Extents shape(axes.size());
  for (std::size_t k = 0; k != axes.size(); ++k) shape[k] = from.shape[static_cast<std::size_t>(axes[k])];
  return remap(from, shape, [&](const Extents& c) {
    Extents s(c.size());
    for (std::size_t k = 0; k != axes.size(); ++k) s[static_cast<std::size_t>(axes[k])] = c[k];
    return s;
  });
}

Ref ref_transpose(const Ref& from, int a, int b) {
  std::vector<int> axes(from.shape.size());
  for (std::size_t k = 0; k != axes.size(); ++k) axes[k] = static_cast<int>(k);
  std::swap(axes[static_cast<std::size_t>(a)], axes[static_cast<std::size_t>(b)]);
  return ref_permute(from, axes);
}

Ref ref_slice(const Ref& from, std::size_t axis, std::int64_t begin, std::int64_t end, std::int64_t step) {
  Extents shape = from.shape;
  shape[axis] = 0;
  for (std::int64_t i = begin; i < end; i += step) ++shape[axis];
  return remap(from, shape, [&](Extents c) {
    c[axis] = begin + c[axis] * step;
    return c;
  });
}

Ref ref_select(const Ref& from, std::size_t axis, std::int64_t index) {
  Extents shape = from.shape;
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  return remap(from, shape, [&](Extents c) {
    c.insert(c.begin() + static_cast<std::ptrdiff_t>(axis), index);
    return c;
  });
}

Ref ref_unsqueeze(const Ref& from, std::size_t axis) {
  Extents shape = from.shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), 1);
  return remap(from, shape, [&](Extents c) {
    c.erase(c.begin() + static_cast<std::ptrdiff_t>(axis));
    return c;
  });
}

Ref ref_squeeze(const Ref& from, std::size_t axis) { return ref_select(from, axis, 0); }

Ref ref_expand(const Ref& from, const Extents& target) {  // target fully resolved
  const std::size_t lead = target.size() - from.shape.size();
  return remap(from, target, [&](const Extents& c) {
    Extents s(from.shape.size());
    for (std::size_t d = 0; d != s.size(); ++d) s[d] = from.shape[d] == 1 ? 0 : c[lead + d];
    return s;
  });
}

/// The tensor every view in a test reads: contiguous from offset 0, so the row-major
/// index of its elements is also their storage offset.
struct Root {
  std::shared_ptr<void> storage;
  const double* data;
  std::vector<double> values;
};

template <int R>
Root make_root(const et::Tensor<double, R>& t, const std::vector<double>& values) {
  return {t.storage(), t.data(), values};
}

/// Values (read back, and through an elementwise evaluation), and, when the view shares
/// the root's storage, its layout: element c of the view is storage element
/// offset() + sum(c[d] * strides()[d]), which must be the element the reference names.
template <int R>
void check_view(const et::Tensor<double, R>& view, const Ref& ref, const Root& root) {
  REQUIRE(extents_of(view.shape()) == ref.shape);
  std::vector<double> expected;
  for (auto s : ref.source) expected.push_back(root.values[static_cast<std::size_t>(s)]);
  CHECK(view.to_vector() == expected);
  CHECK(et::eval(view + 0.0).to_vector() == expected);
  if (view.storage() != root.storage) return;  // a copy: the caller checks that it may copy
  std::size_t i = 0, misplaced = 0;
  for_each_coordinate(ref.shape, [&](const Extents& c) {
    std::int64_t at = view.offset();
    for (std::size_t d = 0; d != c.size(); ++d) at += c[d] * view.strides()[d];
    if (at != ref.source[i++]) ++misplaced;
  });
  CHECK(misplaced == 0);
  if (view.numel() > 0) CHECK(view.data() == root.data + view.offset());
}

template <int R>
void check_shares(const et::Tensor<double, R>& view, const Ref& ref, const Root& root) {
  CHECK(view.storage() == root.storage);
  check_view(view, ref, root);
}

/// Every view op, with edge arguments, applied to x (which is itself the root or a view of it).
template <int R>
void check_every_view(const et::Tensor<double, R>& x, const Ref& ref, const Root& root) {
  constexpr auto rank = static_cast<std::size_t>(R);
  const Extents shape = extents_of(x.shape());
  const std::int64_t count = count_of(shape);

  // view / reshape. Inserting axes of extent 1 is a view of any layout; flattening is a
  // view of contiguous layouts, and reshape copies for the others.
  {
    std::array<std::int64_t, rank + 2> with_ones{};
    with_ones[0] = 1;
    for (std::size_t d = 0; d != rank; ++d) with_ones[d + 1] = shape[d];
    with_ones[rank + 1] = 1;
    check_shares(x.view(with_ones), ref_view(ref, extents_of(with_ones)), root);
    const auto flat = x.reshape({-1});
    check_view(flat, ref_view(ref, {count}), root);
    if (x.is_contiguous()) {
      check_shares(x.view({count}), ref_view(ref, {count}), root);
      CHECK(flat.storage() == root.storage);
    } else if (flat.storage() != root.storage) {
      CHECK(flat.is_contiguous());
    }
    if constexpr (R >= 2) {
      if (x.is_contiguous()) {  // split differently: [a, b, rest...] -> [b, a, rest...]
        std::array<std::int64_t, rank> swapped{};
        for (std::size_t d = 0; d != rank; ++d) swapped[d] = shape[d];
        std::swap(swapped[0], swapped[1]);
        check_shares(x.view(swapped), ref_view(ref, extents_of(swapped)), root);
      }
    }
  }
  // transpose: every pair of axes, and negative axes.
  if constexpr (R >= 1) {
    for (int a = 0; a < R; ++a)
      for (int b = 0; b < R; ++b) {
        CAPTURE(a, b);
        check_shares(x.transpose(a, b), ref_transpose(ref, a, b), root);
      }
    check_shares(x.transpose(-1, 0), ref_transpose(ref, R - 1, 0), root);
  }
  // permute: reversed and rotated axes (the rotation spelled with negative axes).
  if constexpr (R >= 1) {
    std::array<int, rank> reversed{}, rotated{};
    std::vector<int> reversed_ref(rank), rotated_ref(rank);
    for (std::size_t k = 0; k != rank; ++k) {
      reversed[k] = reversed_ref[k] = R - 1 - static_cast<int>(k);
      rotated_ref[k] = static_cast<int>((k + 1) % rank);
      rotated[k] = rotated_ref[k] - R;
    }
    check_shares(x.permute(reversed), ref_permute(ref, reversed_ref), root);
    check_shares(x.permute(rotated), ref_permute(ref, rotated_ref), root);
  } else {
    check_shares(x.permute(std::array<int, 0>{}), ref, root);
  }
  if constexpr (R >= 1) {
    for (int axis = 0; axis < R; ++axis) {
      const std::int64_t size = shape[static_cast<std::size_t>(axis)];
      CAPTURE(axis, size);
      // slice: whole, stepped, empty, negative bounds, with steps past the extent.
      struct Bounds {
        std::int64_t begin, end, step;
      };
      const Bounds all_bounds[] = {{0, size, 1}, {size / 3, size, 2}, {0, 0, 1}, {size, size, 3},
                                   {-size, size, 3}, {-(size + 1) / 2, size, 1}, {0, -size / 2, 1},
                                   {0, size, size + 5}};
      for (const Bounds& b : all_bounds) {
        CAPTURE(b.begin, b.end, b.step);
        const std::int64_t begin = b.begin < 0 ? b.begin + size : b.begin, end = b.end < 0 ? b.end + size : b.end;
        const auto sliced = x.slice(axis, b.begin, b.end, b.step);
        check_shares(sliced, ref_slice(ref, static_cast<std::size_t>(axis), begin, end, b.step), root);
        check_shares(x.slice(axis - R, b.begin, b.end, b.step), ref_slice(ref, static_cast<std::size_t>(axis), begin, end, b.step), root);
      }
      // select: first, last, middle, and negative indices.
      for (const std::int64_t index : {std::int64_t{0}, size - 1, size / 2, std::int64_t{-1}, -size}) {
        if (size == 0) break;
        CAPTURE(index);
        check_shares(x.select(axis, index), ref_select(ref, static_cast<std::size_t>(axis), index < 0 ? index + size : index),
                     root);
      }
      // squeeze: each axis of extent 1.
      if (size == 1) {
        check_shares(x.squeeze(axis), ref_squeeze(ref, static_cast<std::size_t>(axis)), root);
        check_shares(x.squeeze(axis - R), ref_squeeze(ref, static_cast<std::size_t>(axis)), root);
      }
    }
  }
  // unsqueeze: every position of the new axis, from -(R + 1) to R.
  for (int axis = -(R + 1); axis <= R; ++axis) {
    CAPTURE(axis);
    check_shares(x.unsqueeze(axis), ref_unsqueeze(ref, static_cast<std::size_t>(axis < 0 ? axis + R + 1 : axis)), root);
  }
  // expand: a new leading axis of extent 2, axes of extent 1 stretched to 3, -1 keeps the others.
  {
    std::array<std::int64_t, rank + 1> target{}, spelled{};
    target[0] = spelled[0] = 2;
    for (std::size_t d = 0; d != rank; ++d) {
      target[d + 1] = shape[d] == 1 ? 3 : shape[d];
      spelled[d + 1] = shape[d] == 1 ? 3 : -1;
    }
    const auto expanded = x.expand(spelled);
    check_shares(expanded, ref_expand(ref, extents_of(target)), root);
    if constexpr (R >= 1) {
      const auto same_rank = x.expand(x.shape());
      check_shares(same_rank, ref, root);
      CHECK(same_rank.strides() == x.strides());
    }
  }
  // contiguous: the same tensor when already contiguous, else a fresh contiguous copy.
  const auto dense = x.contiguous();
  check_view(dense, ref, root);
  CHECK(dense.is_contiguous());
  if (x.is_contiguous()) {
    CHECK(dense.storage() == x.storage());
    CHECK(dense.data() == x.data());
  } else {
    CHECK(dense.storage() != x.storage());
  }
}

/// check_every_view on a random root of `shape`, and on views of it (views of views).
template <std::size_t R>
void check_every_view_of_shape(const std::array<std::int64_t, R>& shape) {
  CAPTURE(et::format_shape(shape));
  const Extents extents = extents_of(shape);
  const auto values = random_values<double>(static_cast<std::size_t>(count_of(extents)), 100 + R);
  const auto x = et::from_vector(et::cpu, values, shape);
  const Root root = make_root(x, values);
  const Ref ref = identity(extents);
  SECTION("of the tensor") { check_every_view(x, ref, root); }
  if constexpr (R >= 1) {
    SECTION("of a stepped slice") {
      const std::int64_t last = shape[R - 1];
      check_every_view(x.slice(-1, last / 2, last, 2), ref_slice(ref, R - 1, last / 2, last, 2), root);
    }
  }
  if constexpr (R >= 2) {
    SECTION("of a transposed view") { check_every_view(x.transpose(0, -1), ref_transpose(ref, 0, int(R) - 1), root); }
  }
  if constexpr (R <= 3) {
    SECTION("of an expanded view") {
      std::array<std::int64_t, R + 1> target{};
      target[0] = 3;
      for (std::size_t d = 0; d != R; ++d) target[d + 1] = shape[d];
      check_every_view(x.expand(target), ref_expand(ref, extents_of(target)), root);
    }
  }
}

}  // namespace

TEST_CASE("every view reads the right elements without copying, for edge shapes of rank 0 to 4", "[views]") {
  SECTION("rank 0") { check_every_view_of_shape(Shape<0>{}); }
  SECTION("rank 1") {
    const auto shape = GENERATE(values<Shape<1>>({{0}, {1}, {7}}));
    check_every_view_of_shape(shape);
  }
  SECTION("rank 2") {
    const auto shape = GENERATE(values<Shape<2>>({{0, 3}, {1, 1}, {3, 5}, {4, 1}}));
    check_every_view_of_shape(shape);
  }
  SECTION("rank 3") {
    const auto shape = GENERATE(values<Shape<3>>({{2, 0, 3}, {1, 3, 1}, {3, 4, 5}}));
    check_every_view_of_shape(shape);
  }
  SECTION("rank 4") {
    const auto shape = GENERATE(values<Shape<4>>({{2, 3, 1, 5}, {1, 2, 0, 3}, {2, 3, 4, 5}}));
    check_every_view_of_shape(shape);
  }
}

TEST_CASE("view() follows PyTorch's stride rule", "[views][layout]") {
  using et::detail::view_strides;
  using S2 = Shape<2>;
  using S3 = Shape<3>;
  // Contiguous: any shape of the same count.
  CHECK(view_strides(S2{3, 4}, S2{4, 1}, S3{2, 3, 2}) == S3{6, 2, 1});
  // Transposed [4, 3] -> [3, 4], strides [1, 3]: the axes cannot merge, but each can split.
  CHECK_FALSE(view_strides(S2{3, 4}, S2{1, 3}, Shape<1>{12}));
  CHECK(view_strides(S2{3, 4}, S2{1, 3}, S3{3, 2, 2}) == S3{1, 6, 3});
  // Expanded rows (stride 0): splitting keeps the stride 0, merging is impossible.
  CHECK(view_strides(S2{3, 4}, S2{0, 1}, S3{3, 2, 2}) == S3{0, 2, 1});
  CHECK_FALSE(view_strides(S2{3, 4}, S2{0, 1}, Shape<1>{12}));
  // A column slice [3, 3] of a [3, 5] tensor: rows cannot merge; axes of extent 1 can come and go.
  CHECK_FALSE(view_strides(S2{3, 3}, S2{5, 1}, Shape<1>{9}));
  CHECK(view_strides(S2{3, 3}, S2{5, 1}, Shape<4>{1, 3, 1, 3}) == Shape<4>{15, 5, 3, 1});
  // Extent-1 axes with any stride do not break a chunk.
  CHECK(view_strides(S3{2, 1, 4}, S3{4, 99, 1}, S2{4, 2}) == S2{2, 1});
  // No elements: strides are never used; the same shape keeps its strides.
  CHECK(view_strides(S2{0, 5}, S2{1, 7}, S2{0, 5}) == S2{1, 7});
  CHECK(view_strides(S2{0, 5}, S2{1, 7}, S2{5, 0}) == S2{1, 1});
  // Rank 0 to and from.
  CHECK(view_strides(Shape<0>{}, Shape<0>{}, S2{1, 1}) == S2{1, 1});
  CHECK(view_strides(S2{1, 1}, S2{7, 3}, Shape<0>{}) == Shape<0>{});
  // A layout without elements is contiguous whatever its strides, freshly allocated or not.
  CHECK(et::detail::is_contiguous_layout(S2{3, 0}, et::detail::contiguous_strides(S2{3, 0})));
  CHECK(et::detail::is_contiguous_layout(S2{0, 4}, S2{1, 0}));
}

TEST_CASE("views share storage and handles of temporaries stay valid", "[views]") {
  const auto values = random_values<double>(60, 5);
  auto x = et::from_vector(et::cpu, values, {3, 4, 5});
  const auto chained = x.transpose(0, 2).slice(0, 1, 5, 2).select(1, 3).unsqueeze(0).expand({4, 2, 3});
  CHECK(chained.storage() == x.storage());
  CHECK(chained.shape() == Shape<3>{4, 2, 3});
  CHECK(chained.strides() == Shape<3>{0, 2, 20});
  CHECK(chained.offset() == 1 + 3 * 5);
  // Element [k, i, j] is x[j, 3, 1 + 2 i].
  const auto got = chained.to_vector();
  for (std::int64_t k = 0; k < 4; ++k)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        REQUIRE(got[static_cast<std::size_t>((k * 2 + i) * 3 + j)] == values[static_cast<std::size_t>(j * 20 + 3 * 5 + 1 + 2 * i)]);
  // The view keeps the storage alive after the base handle is gone.
  const auto storage = x.storage();
  x = et::zeros<double>(et::cpu, {1, 1, 1});
  CHECK(chained.storage() == storage);
  CHECK(chained.to_vector() == got);
  // Views of an rvalue temporary.
  const auto row = et::from_vector(et::cpu, values, {6, 10}).select(0, 5).slice(0, 0, 10, 3);
  CHECK(row.to_vector() == std::vector<double>{values[50], values[53], values[56], values[59]});
  // Explicit layouts of each op.
  const auto m = et::from_vector(et::cpu, values, {3, 4, 5});
  CHECK(m.transpose(0, 2).strides() == Shape<3>{1, 5, 20});
  CHECK(m.permute({1, 2, 0}).strides() == Shape<3>{5, 1, 20});
  CHECK(m.slice(2, 1, 5, 3).strides() == Shape<3>{20, 5, 3});
  CHECK(m.slice(2, 1, 5, 3).offset() == 1);
  CHECK(m.slice(1, 3, 4, 2).strides() == Shape<3>{20, 5, 1});  // one element: the stride is never stepped
  CHECK(m.select(1, -1).strides() == Shape<2>{20, 1});
  CHECK(m.select(1, -1).offset() == 15);
  CHECK(m.unsqueeze(1).strides() == Shape<4>{20, 20, 5, 1});  // as PyTorch strides it
  CHECK(m.unsqueeze(-1).strides() == Shape<4>{20, 5, 1, 1});
  CHECK(m.slice(0, 1, 2).squeeze(0).strides() == Shape<2>{5, 1});
  CHECK(m.slice(0, 1, 2).squeeze(0).offset() == 20);
  CHECK(m.select(2, 0).unsqueeze(-1).expand({2, 3, 4, 6}).strides() == Shape<4>{0, 20, 5, 0});
  CHECK(m.view({-1, 10}).strides() == Shape<2>{10, 1});
  CHECK(m.view({-1, 10}).shape() == Shape<2>{6, 10});
}

namespace {

/// Writes through the temporary view make_view(x) in each assignment form, and checks
/// that exactly the base elements the reference names changed.
template <class MakeView, class MakeRef>
void check_write_through(const Shape<3>& shape, MakeView make_view, MakeRef make_ref) {
  const auto values = random_values<double>(static_cast<std::size_t>(count_of(extents_of(shape))), 200);
  auto x = et::from_vector(et::cpu, values, shape);
  const auto storage = x.storage();
  const Ref ref = make_ref(identity(extents_of(shape)));
  const auto y_values = random_values<double>(ref.source.size(), 201);
  const auto y = et::from_vector(et::cpu, y_values, make_view(x).shape());
  std::vector<double> expected = values;
  auto update = [&](auto f) {
    for (std::size_t i = 0; i < ref.source.size(); ++i) {
      double& e = expected[static_cast<std::size_t>(ref.source[i])];
      e = f(e, y_values[i]);
    }
  };

  make_view(x) = y;  // a Tensor of the view's own type: writes through (an rvalue does not rebind)
  update([](double, double v) { return v; });
  CHECK(x.to_vector() == expected);
  make_view(x) = 2.5;
  update([](double, double) { return 2.5; });
  CHECK(x.to_vector() == expected);
  make_view(x) += y;
  update([](double e, double v) { return e + v; });
  CHECK(x.to_vector() == expected);
  make_view(x) = y * 2.0 - 1.0;
  update([](double, double v) { return v * 2.0 - 1.0; });
  CHECK(x.to_vector() == expected);
  make_view(x).copy_(y);
  update([](double, double v) { return v; });
  CHECK(x.to_vector() == expected);
  auto named = make_view(x);  // a named view is a handle: expressions write through it
  named *= 3.0;
  update([](double e, double) { return e * 3.0; });
  CHECK(x.to_vector() == expected);
  CHECK(x.storage() == storage);
}

}  // namespace

TEST_CASE("writing into a view writes into the base tensor", "[views]") {
  const auto shape = GENERATE(values<Shape<3>>({{3, 4, 5}, {1, 1, 1}, {2, 7, 1}}));
  const auto [s0, s1, s2] = shape;
  CAPTURE(s0, s1, s2);
  SECTION("view") {
    check_write_through(shape, [&](const auto& x) { return x.view({s0, -1}); }, [&](const Ref& r) { return ref_view(r, {s0, s1 * s2}); });
  }
  SECTION("reshape (a view here)") {
    check_write_through(shape, [](const auto& x) { return x.reshape({-1}); }, [&](const Ref& r) { return ref_view(r, {s0 * s1 * s2}); });
  }
  SECTION("transpose") {
    check_write_through(shape, [](const auto& x) { return x.transpose(0, 2); }, [](const Ref& r) { return ref_transpose(r, 0, 2); });
  }
  SECTION("permute") {
    check_write_through(shape, [](const auto& x) { return x.permute({2, 0, 1}); }, [](const Ref& r) { return ref_permute(r, {2, 0, 1}); });
  }
  SECTION("slice with a step") {
    check_write_through(shape, [&](const auto& x) { return x.slice(1, 1, s1, 2); }, [&](const Ref& r) { return ref_slice(r, 1, 1, s1, 2); });
  }
  SECTION("slice with negative bounds") {
    check_write_through(shape, [&](const auto& x) { return x.slice(-1, -1, s2); }, [&](const Ref& r) { return ref_slice(r, 2, s2 - 1, s2, 1); });
    check_write_through(shape, [&](const auto& x) { return x.slice(1, -s1, -1, 2); },
                        [&](const Ref& r) { return ref_slice(r, 1, 0, s1 - 1, 2); });
  }
  SECTION("select") {
    check_write_through(shape, [](const auto& x) { return x.select(-1, -1); }, [&](const Ref& r) { return ref_select(r, 2, s2 - 1); });
  }
  SECTION("unsqueeze") {
    check_write_through(shape, [](const auto& x) { return x.unsqueeze(1); }, [](const Ref& r) { return ref_unsqueeze(r, 1); });
  }
  SECTION("squeeze") {
    check_write_through(shape, [](const auto& x) { return x.slice(0, 0, 1).squeeze(0); },
                        [](const Ref& r) { return ref_squeeze(ref_slice(r, 0, 0, 1, 1), 0); });
  }
  SECTION("contiguous (of a contiguous tensor: itself)") {
    check_write_through(shape, [](const auto& x) { return x.contiguous(); }, [](const Ref& r) { return r; });
  }
  SECTION("a chain of views") {
    check_write_through(shape, [&](const auto& x) { return x.transpose(0, 2).slice(0, s2 / 2, s2, 2).select(1, -1).unsqueeze(0); },
                        [&](const Ref& r) { return ref_unsqueeze(ref_select(ref_slice(ref_transpose(r, 0, 2), 0, s2 / 2, s2, 2), 1, s1 - 1), 0); });
  }
}

TEST_CASE("reading and writing the same storage: x = x.transpose(0, 1) and overlapping slices", "[views]") {
  const std::int64_t n = GENERATE(1, 2, 7, 300);
  CAPTURE(n);
  const auto values = random_values<double>(static_cast<std::size_t>(n * n), 300 + static_cast<std::uint64_t>(n));
  std::vector<double> transposed(values.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      transposed[static_cast<std::size_t>(i * n + j)] = values[static_cast<std::size_t>(j * n + i)];

  SECTION("x = x.transpose(0, 1) rebinds the handle to the view (no data moves)") {
    auto x = et::from_vector(et::cpu, values, {n, n});
    const auto storage = x.storage();
    x = x.transpose(0, 1);
    CHECK(x.storage() == storage);
    CHECK(x.to_vector() == transposed);
    if (n > 1) CHECK(x.strides() == Shape<2>{1, n});
  }
  SECTION("in place: copy_, a temporary view, an expression") {
    auto x = et::from_vector(et::cpu, values, {n, n});
    const auto data = x.data();
    x.copy_(x.transpose(0, 1));
    CHECK(x.to_vector() == transposed);
    x.view({n, n}) = x.transpose(0, 1);  // back again
    CHECK(x.to_vector() == values);
    x = x.transpose(0, 1) * 1.0;
    CHECK(x.to_vector() == transposed);
    x.transpose(1, 0) = x + 0.0;  // the destination is the transposed view
    CHECK(x.to_vector() == values);
    CHECK(x.data() == data);
    CHECK(x.is_contiguous());
  }
  SECTION("x += x.transpose(0, 1) is symmetric") {
    auto x = et::from_vector(et::cpu, values, {n, n});
    x += x.transpose(0, 1);
    std::vector<double> expected(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) expected[i] = values[i] + transposed[i];
    CHECK(x.to_vector() == expected);
  }
  SECTION("shifted overlapping slices") {
    auto x = et::from_vector(et::cpu, values, {n, n});
    x.slice(0, 1, n) = x.slice(0, 0, n - 1);  // every row moves down by one
    std::vector<double> expected = values;
    for (std::size_t i = static_cast<std::size_t>(n); i < values.size(); ++i) expected[i] = values[i - static_cast<std::size_t>(n)];
    CHECK(x.to_vector() == expected);
    auto flat = et::from_vector(et::cpu, values);
    flat.slice(0, 0, n * n - 1) = flat.slice(0, 1, n * n) * 2.0;  // shifted left, one long loop
    expected = values;
    for (std::size_t i = 0; i + 1 < values.size(); ++i) expected[i] = 2.0 * values[i + 1];
    CHECK(flat.to_vector() == expected);
  }
}

TEST_CASE("expressions mix views with broadcast and non-contiguous operands", "[views][expr]") {
  const std::int64_t m = GENERATE(1, 3, 65), n = GENERATE(1, 4, 129);
  CAPTURE(m, n);
  const auto av = random_values<double>(static_cast<std::size_t>(n * m), 400);      // [n, m], read transposed
  const auto bv = random_values<double>(static_cast<std::size_t>(m * 2 * n), 401);  // [m, 2n], every other column
  const auto cv = random_values<double>(static_cast<std::size_t>(n), 402);          // [n], expanded over rows
  const auto dv = random_values<double>(static_cast<std::size_t>(m), 403);          // [m], a column
  const auto a = et::from_vector(et::cpu, av, {n, m});
  const auto b = et::from_vector(et::cpu, bv, {m, 2 * n});
  const auto c = et::from_vector(et::cpu, cv, {n});
  const auto d = et::from_vector(et::cpu, dv, {m});
  auto expected_at = [&](std::int64_t i, std::int64_t j) {
    const auto at = [](const std::vector<double>& v, std::int64_t k) { return v[static_cast<std::size_t>(k)]; };
    return std::sin(at(av, j * m + i)) * at(bv, i * 2 * n + 2 * j) + at(cv, j) - at(dv, i);
  };
  auto expression = [&] {
    return et::sin(a.transpose(0, 1)) * b.slice(1, 0, 2 * n, 2) + c.unsqueeze(0).expand({m, n}) - d.unsqueeze(1);
  };
  std::vector<double> expected(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) expected[static_cast<std::size_t>(i * n + j)] = expected_at(i, j);

  SECTION("into a new tensor") {
    const et::Tensor<double, 2> z = expression();
    test::check_all_close(z.to_vector(), expected, 1e-15);
  }
  SECTION("into a stepped, transposed view of a larger tensor") {
    auto out = et::zeros<double>(et::cpu, {2 * n, m});
    out.slice(0, 1, 2 * n, 2).transpose(0, 1) = expression();
    const auto got = out.to_vector();
    std::size_t wrong = 0;
    for (std::int64_t r = 0; r < 2 * n; ++r)
      for (std::int64_t i = 0; i < m; ++i) {
        const double want = r % 2 ? expected_at(i, r / 2) : 0.0;
        if (!test::close(got[static_cast<std::size_t>(r * m + i)], want, 1e-15)) ++wrong;
      }
    CHECK(wrong == 0);
  }
  SECTION("the linear (vectorizable) path is taken only when every operand allows it") {
    const auto dst = et::empty<double>(et::cpu, {m, n});
    using et::detail::plan_elementwise;
    const auto rows = et::from_vector(et::cpu, bv, {2 * m, n});
    CHECK(plan_elementwise(dst, rows.slice(0, m, 2 * m) + 1.0).linear);  // contiguous rows at an offset
    CHECK(plan_elementwise(dst, b.view({m, 2, n}).select(1, 0) * 2.0).linear == (m == 1));
    CHECK(plan_elementwise(dst, b.slice(1, 0, 2 * n, 2) + 1.0).linear == (m == 1 && n == 1));
    CHECK(plan_elementwise(dst, a.transpose(0, 1) + 1.0).linear == (n == 1 || m == 1));
    CHECK(plan_elementwise(dst, c.expand({m, n}) + 1.0).linear == (m == 1));
    // The GPU's linear kernel reads a broadcast row at (i / div) % mod (plan.wrapped), but
    // only into outputs of rank 2 and up: a rank-1 output's broadcast operand is one element,
    // read by the strided kernel (expr/readers.hpp's ReaderWrap).
    CHECK(plan_elementwise(dst, c + 1.0).wrapped);
    CHECK(plan_elementwise(dst, a.transpose(0, 1) + 1.0).wrapped == (n == 1 || m == 1));
    const auto line = et::empty<double>(et::cpu, {n});
    const auto one = et::from_vector(et::cpu, std::vector<double>{2.0}, {1});
    CHECK(plan_elementwise(line, c * 2.0).wrapped);
    CHECK(plan_elementwise(line, c * one).wrapped == (n == 1));
  }
}

TEST_CASE("contiguous(), reshape() and clone() of views", "[views]") {
  const auto values = random_values<float>(35, 500);
  const auto x = et::from_vector(et::cpu, values, {5, 7});
  std::vector<float> transposed;
  for (std::size_t j = 0; j < 7; ++j)
    for (std::size_t i = 0; i < 5; ++i) transposed.push_back(values[i * 7 + j]);

  const auto t = x.transpose(0, 1);
  const auto dense = t.contiguous();
  CHECK(dense.storage() != x.storage());
  CHECK(dense.strides() == Shape<2>{5, 1});
  CHECK(dense.offset() == 0);
  CHECK(dense.to_vector() == transposed);
  CHECK(x.contiguous().data() == x.data());

  const auto flat = t.reshape({35});  // not viewable: a copy
  CHECK(flat.storage() != x.storage());
  CHECK(flat.to_vector() == transposed);
  const auto split = t.reshape({7, 5, 1});  // viewable: shares
  CHECK(split.storage() == x.storage());
  CHECK(x.reshape({-1, 5}).storage() == x.storage());

  // An expanded tensor: contiguous() gives a writable copy; clone() keeps the stride-0 axes.
  const auto row = x.select(0, 2).unsqueeze(0).expand({3, 7});
  auto writable = row.contiguous();
  CHECK(writable.is_contiguous());
  writable.select(0, 1) = 0.0f;
  const auto cloned = row.clone();
  CHECK(cloned.storage() != x.storage());
  CHECK(cloned.strides() == Shape<2>{0, 1});
  CHECK(cloned.to_vector() == row.to_vector());
  const auto writable_values = writable.to_vector();
  for (std::size_t j = 0; j < 7; ++j) {
    CHECK(writable_values[j] == values[14 + j]);
    CHECK(writable_values[7 + j] == 0.0f);
  }
  // A stepped slice clones into storage of its own.
  auto every_other = x.slice(1, 0, 7, 2);
  const auto copy = every_other.clone();
  every_other = 9.0f;
  CHECK(copy.to_vector() == std::vector<float>{values[0], values[2], values[4], values[6], values[7], values[9], values[11],
                                               values[13], values[14], values[16], values[18], values[20], values[21],
                                               values[23], values[25], values[27], values[28], values[30], values[32],
                                               values[34]});
  CHECK(x.to_vector()[2] == 9.0f);
  CHECK(x.to_vector()[3] == values[3]);

  // No elements: views and copies of empty tensors are empty, never an error.
  const auto empty = et::zeros<float>(et::cpu, {0, 4});
  CHECK(empty.transpose(0, 1).contiguous().shape() == Shape<2>{4, 0});
  CHECK(empty.reshape({2, 0, 2}).numel() == 0);
  CHECK(x.slice(0, 5, 5).numel() == 0);
  CHECK(x.slice(0, 5, 5).contiguous().shape() == Shape<2>{0, 7});
}

TEST_CASE("bad view arguments throw ShapeError naming the shape and the axis", "[views][errors]") {
  const auto x = et::from_vector(et::cpu, random_values<float>(15, 600), {3, 5});
  const auto x3 = et::zeros<float>(et::cpu, {2, 3, 4});
  SECTION("view and reshape") {
    CHECK_THROWS_MATCHES(x.view({4, -1}), et::ShapeError,
                         Message("et: view(): shape [4, -1] is invalid for a tensor of shape [3, 5] (15 elements)"));
    CHECK_THROWS_MATCHES(x.view({2, 8}), et::ShapeError,
                         Message("et: view(): shape [2, 8] is invalid for a tensor of shape [3, 5] (15 elements)"));
    CHECK_THROWS_MATCHES(x.view({-1, -1}), et::ShapeError,
                         Message("et: view(): only one extent can be inferred, but shape [-1, -1] has more than one -1"));
    CHECK_THROWS_MATCHES(x.view({-3, -5}), et::ShapeError,
                         Message("et: view(): shape [-3, -5] is invalid for a tensor of shape [3, 5] (15 elements): "
                                 "extents must be >= 0, or -1 for one inferred extent"));
    CHECK_THROWS_MATCHES(et::zeros<float>(et::cpu, {0, 5}).view({0, -1}), et::ShapeError,
                         Message("et: view(): shape [0, -1] is invalid for a tensor of shape [0, 5] (0 elements): "
                                 "the -1 is ambiguous when the other extents hold no elements"));
    CHECK_THROWS_MATCHES(x.transpose(0, 1).view({15}), et::ShapeError,
                         Message("et: view(): a tensor of shape [5, 3] and strides [1, 5] cannot be viewed as shape [15] "
                                 "without copying; use reshape(), which copies when it must"));
    CHECK_THROWS_MATCHES(x.slice(1, 0, 4).view({-1}), et::ShapeError, Message("et: view(): a tensor of shape [3, 4] and strides [5, 1] cannot be viewed as shape [12] without copying; use reshape(), which copies when it must"));
    CHECK_THROWS_MATCHES(x.reshape({4, 4}), et::ShapeError,
                         Message("et: reshape(): shape [4, 4] is invalid for a tensor of shape [3, 5] (15 elements)"));
    CHECK_THROWS_MATCHES(x.transpose(0, 1).reshape({2, -1}), et::ShapeError,
                         Message("et: reshape(): shape [2, -1] is invalid for a tensor of shape [5, 3] (15 elements)"));
  }
  SECTION("axes") {
    CHECK_THROWS_MATCHES(x.transpose(0, 2), et::ShapeError,
                         Message("et: transpose(): axis 2 is out of range for a tensor of shape [3, 5] (valid axes are -2 to 1)"));
    CHECK_THROWS_MATCHES(x.transpose(-3, 0), et::ShapeError,
                         Message("et: transpose(): axis -3 is out of range for a tensor of shape [3, 5] (valid axes are -2 to 1)"));
    CHECK_THROWS_MATCHES(x3.permute({0, 0, 1}), et::ShapeError,
                         Message("et: permute(): axes [0, 0, 1] are not a permutation of the axes of a tensor of shape "
                                 "[2, 3, 4]: axis 0 appears more than once"));
    CHECK_THROWS_MATCHES(x3.permute({2, 0, -1}), et::ShapeError,
                         Message("et: permute(): axes [2, 0, -1] are not a permutation of the axes of a tensor of shape "
                                 "[2, 3, 4]: axis 2 appears more than once"));
    CHECK_THROWS_MATCHES(x3.permute({0, 3, 1}), et::ShapeError,
                         Message("et: permute(): axis 3 is out of range for a tensor of shape [2, 3, 4] (valid axes are -3 to 2)"));
    CHECK_THROWS_MATCHES(x.unsqueeze(3), et::ShapeError,
                         Message("et: unsqueeze(): axis 3 is out of range for a tensor of shape [3, 5] (valid axes are -3 to 2)"));
    CHECK_THROWS_WITH(x.unsqueeze(-4), Contains("axis -4 is out of range"));
    CHECK_THROWS_MATCHES(et::zeros<float>(et::cpu, et::Shape<0>{}).unsqueeze(1), et::ShapeError,
                         Message("et: unsqueeze(): axis 1 is out of range for a tensor of shape [] (valid axes are -1 to 0)"));
    CHECK_THROWS_MATCHES(x.select(2, 0), et::ShapeError,
                         Message("et: select(): axis 2 is out of range for a tensor of shape [3, 5] (valid axes are -2 to 1)"));
    CHECK_THROWS_MATCHES(x.squeeze(0), et::ShapeError,
                         Message("et: squeeze(): axis 0 of a tensor of shape [3, 5] has extent 3; only an axis of extent 1 can be removed"));
    CHECK_THROWS_MATCHES(x.squeeze(-3), et::ShapeError,
                         Message("et: squeeze(): axis -3 is out of range for a tensor of shape [3, 5] (valid axes are -2 to 1)"));
  }
  SECTION("slice and select bounds") {
    CHECK_THROWS_MATCHES(x.slice(1, 2, 7), et::ShapeError,
                         Message("et: slice(): begin 2 and end 7 are out of range for axis 1 of a tensor of shape [3, 5]: "
                                 "they must satisfy 0 <= begin <= end <= 5 (negative values count from the end)"));
    CHECK_THROWS_MATCHES(x.slice(0, 2, 1), et::ShapeError,
                         Message("et: slice(): begin 2 and end 1 are out of range for axis 0 of a tensor of shape [3, 5]: "
                                 "they must satisfy 0 <= begin <= end <= 3 (negative values count from the end)"));
    CHECK_THROWS_MATCHES(x.slice(-1, -6, 5), et::ShapeError,
                         Message("et: slice(): begin -6 and end 5 are out of range for axis -1 of a tensor of shape [3, 5]: "
                                 "they must satisfy 0 <= begin <= end <= 5 (negative values count from the end)"));
    CHECK_THROWS_WITH(x.slice(1, -1, -2), Contains("begin -1 and end -2 are out of range"));
    CHECK_THROWS_MATCHES(x.slice(1, 0, 5, 0), et::ShapeError,
                         Message("et: slice(): step must be at least 1, got 0 (axis 1 of a tensor of shape [3, 5])"));
    CHECK_THROWS_WITH(x.slice(1, 0, 5, -1), Contains("step must be at least 1, got -1"));
    CHECK_THROWS_MATCHES(x.slice(2, 0, 1), et::ShapeError,
                         Message("et: slice(): axis 2 is out of range for a tensor of shape [3, 5] (valid axes are -2 to 1)"));
    CHECK_THROWS_MATCHES(x.select(0, 3), et::ShapeError,
                         Message("et: select(): index 3 is out of range for axis 0 of a tensor of shape [3, 5] (extent 3)"));
    CHECK_THROWS_MATCHES(x.select(-1, -6), et::ShapeError,
                         Message("et: select(): index -6 is out of range for axis -1 of a tensor of shape [3, 5] (extent 5)"));
    CHECK_THROWS_MATCHES(et::zeros<float>(et::cpu, {4, 0}).select(1, 0), et::ShapeError,
                         Message("et: select(): index 0 is out of range for axis 1 of a tensor of shape [4, 0] (extent 0)"));
  }
  SECTION("expand") {
    CHECK_THROWS_MATCHES(x.expand({2, 3, 4}), et::ShapeError,
                         Message("et: expand(): axis 1 of a tensor of shape [3, 5] has extent 5 and cannot be expanded to 4 "
                                 "(target shape [2, 3, 4]); only axes of extent 1 stretch"));
    CHECK_THROWS_WITH(x.expand({1, 5}), Contains("axis 0 of a tensor of shape [3, 5] has extent 3"));
    CHECK_THROWS_MATCHES(x.expand({-1, 3, 5}), et::ShapeError,
                         Message("et: expand(): target shape [-1, 3, 5] has -1 at axis 0, a new leading axis of a tensor of "
                                 "shape [3, 5]; -1 can only keep an existing extent"));
    CHECK_THROWS_MATCHES(x.select(0, 0).unsqueeze(0).expand({-2, 5}), et::ShapeError,
                         Message("et: expand(): target shape [-2, 5] has the negative extent -2 at axis 0"));
  }
  SECTION("undefined tensors") {
    const et::Tensor<float, 2> undefined;
    CHECK_THROWS_MATCHES(undefined.transpose(0, 1), et::Error,
                         Message("et: transpose() on an undefined (default-constructed) tensor"));
    CHECK_THROWS_WITH(undefined.view({-1}), Contains("view() on an undefined"));
    CHECK_THROWS_WITH(undefined.contiguous(), Contains("contiguous() on an undefined"));
  }
}

TEST_CASE("writing into a tensor whose elements overlap throws; reading it is fine", "[views][errors]") {
  const auto values = random_values<float>(5, 700);
  auto x = et::from_vector(et::cpu, values, {5});
  auto expanded = x.unsqueeze(0).expand({3, 5});
  const std::string message =
      "et: cannot write into a tensor whose elements overlap in memory (shape [3, 5], strides [0, 1]: axis 0 has stride 0, "
      "as after expand()); write into a contiguous() copy instead";
  CHECK_THROWS_MATCHES(expanded = 1.0f, et::Error, Message(message));
  CHECK_THROWS_MATCHES(expanded += 1.0f, et::Error, Message(message));
  CHECK_THROWS_MATCHES(x.unsqueeze(0).expand({3, 5}) = x * 2.0f, et::Error, Message(message));
  CHECK_THROWS_MATCHES(expanded.copy_(et::zeros<float>(et::cpu, {3, 5})), et::Error, Message(message));
  CHECK_THROWS_WITH(expanded.transpose(0, 1).slice(0, 1, 3) = 0.0f, Contains("axis 1 has stride 0"));
  CHECK(x.to_vector() == values);  // nothing was written
  // One row of the expanded tensor, or an axis stretched to extent 1 or 0, has no overlap.
  expanded.select(0, 1) = 3.0f;
  CHECK(x.to_vector() == std::vector<float>(5, 3.0f));
  x.unsqueeze(0).expand({0, 5}) = 4.0f;
  // No elements, so none overlap, whatever the strides: stride 0 on an axis of extent 3
  // beside one of extent 0 (a GELU linear layer's buffer with no columns had such a layout).
  auto none = et::Tensor<float, 2>(x.storage(), 0, {3, 0}, {0, 1});
  CHECK_NOTHROW(none = 5.0f);
  CHECK_NOTHROW(none += x.slice(0, 0, 0).unsqueeze(0));
  x.unsqueeze(0).expand({1, 5}) = x * 2.0f;
  CHECK(x.to_vector() == std::vector<float>(5, 6.0f));
  // Reading: an expanded operand in an expression, and a copy of it.
  const et::Tensor<float, 2> doubled = expanded * 2.0f;
  CHECK(doubled.to_vector() == std::vector<float>(15, 12.0f));
}
