// Layout arithmetic and device tags: host-only, like CuTe's layout tests.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <limits>

using et::Shape;
using Catch::Matchers::Contains;

static_assert(et::Device<et::Cpu> && et::Device<et::Cuda<0>> && et::Device<et::Cuda<5>>);
static_assert(!et::Device<int> && !et::Device<et::detail::AnyDevice>);
static_assert(et::CudaDevice<et::Cuda<1>> && !et::CudaDevice<et::Cpu>);
static_assert(et::device_name<et::Cpu>.view() == "cpu");
static_assert(et::device_name<et::Cuda<0>>.view() == "cuda:0");
static_assert(et::device_name<et::Cuda<123>>.view() == "cuda:123");

TEST_CASE("device names at run time", "[layout]") {
  CHECK(et::device_name_of(-1).view() == "cpu");
  CHECK(et::device_name_of(7).view() == "cuda:7");
  CHECK(std::string(et::device_name<et::Cuda<42>>.c_str()) == "cuda:42");
}

TEST_CASE("element counts are checked", "[layout]") {
  CHECK(et::detail::checked_numel(Shape<0>{}) == 1);
  CHECK(et::detail::checked_numel(Shape<3>{2, 3, 4}) == 24);
  CHECK(et::detail::checked_numel(Shape<2>{0, 5}) == 0);
  // A zero extent makes even a huge shape empty, without overflow.
  CHECK(et::detail::checked_numel(Shape<3>{0, std::int64_t{1} << 62, std::int64_t{1} << 62}) == 0);
  CHECK_THROWS_MATCHES(et::detail::checked_numel(Shape<2>{3, -2}), et::ShapeError,
                       Catch::Matchers::Message("et: negative extent -2 at axis 1 of shape [3, -2]"));
  CHECK_THROWS_WITH(et::detail::checked_numel(Shape<3>{std::int64_t{1} << 32, std::int64_t{1} << 32, 4}),
                    Contains("more elements than fit in 64 bits") && Contains("[4294967296, 4294967296, 4]"));
}

TEST_CASE("contiguous strides and contiguity", "[layout]") {
  CHECK(et::detail::contiguous_strides(Shape<3>{2, 3, 4}) == Shape<3>{12, 4, 1});
  CHECK(et::detail::contiguous_strides(Shape<2>{0, 5}) == Shape<2>{5, 1});
  CHECK(et::detail::is_contiguous_layout(Shape<2>{3, 4}, Shape<2>{4, 1}));
  CHECK_FALSE(et::detail::is_contiguous_layout(Shape<2>{3, 4}, Shape<2>{1, 3}));  // transposed
  CHECK(et::detail::is_contiguous_layout(Shape<2>{1, 4}, Shape<2>{99, 1}));      // size-1 axes are free
  CHECK_FALSE(et::detail::is_contiguous_layout(Shape<1>{4}, Shape<1>{2}));        // a step
}

TEST_CASE("NumPy broadcasting of shapes", "[layout]") {
  using et::detail::broadcast_shape;
  CHECK(broadcast_shape(Shape<2>{3, 4}, Shape<1>{4}) == Shape<2>{3, 4});
  CHECK(broadcast_shape(Shape<2>{3, 1}, Shape<2>{1, 4}) == Shape<2>{3, 4});
  CHECK(broadcast_shape(Shape<1>{1}, Shape<3>{2, 3, 4}) == Shape<3>{2, 3, 4});
  CHECK(broadcast_shape(Shape<0>{}, Shape<2>{2, 5}) == Shape<2>{2, 5});
  CHECK(broadcast_shape(Shape<2>{0, 1}, Shape<1>{7}) == Shape<2>{0, 7});
  CHECK_THROWS_MATCHES(broadcast_shape(Shape<2>{2, 3}, Shape<1>{4}), et::ShapeError,
                       Catch::Matchers::Message("et: shapes [2, 3] and [4] do not broadcast: axis -1 has extents 3 and 4"));
  CHECK_THROWS_WITH(broadcast_shape(Shape<3>{5, 2, 3}, Shape<3>{4, 2, 3}), Contains("axis -3 has extents 5 and 4"));
}

TEST_CASE("broadcast strides read stretched axes with stride 0", "[layout]") {
  using et::detail::broadcast_strides;
  CHECK(broadcast_strides(Shape<1>{4}, Shape<1>{1}, Shape<2>{3, 4}) == Shape<2>{0, 1});
  CHECK(broadcast_strides(Shape<2>{3, 1}, Shape<2>{1, 1}, Shape<2>{3, 4}) == Shape<2>{1, 0});
  CHECK(broadcast_strides(Shape<2>{3, 4}, Shape<2>{1, 3}, Shape<3>{2, 3, 4}) == Shape<3>{0, 1, 3});
  CHECK(et::detail::max_offset(Shape<2>{3, 4}, Shape<2>{1, 3}) == 11);
  CHECK(et::detail::max_offset(Shape<2>{0, 4}, Shape<2>{4, 1}) == 3);
}

TEST_CASE("broadcast operands read at (i / div) % mod of the output's linear index", "[layout]") {
  using et::detail::linear_wrap;
  auto wrap = [](const auto& shape, const auto& strides) {
    const auto w = linear_wrap(shape, strides);
    return std::array<std::int64_t, 2>{w.div, w.mod};
  };
  using Pair = std::array<std::int64_t, 2>;
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{0, 1}) == Pair{1, 4});                // a row vector
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{1, 0}) == Pair{4, 3});                // a column vector
  CHECK(wrap(Shape<4>{2, 3, 5, 7}, Shape<4>{0, 1, 0, 0}) == Pair{35, 3});   // a per-channel bias
  CHECK(wrap(Shape<3>{2, 3, 4}, Shape<3>{0, 4, 1}) == Pair{1, 12});         // a repeated matrix
  CHECK(wrap(Shape<3>{2, 1, 4}, Shape<3>{0, 9, 1}) == Pair{1, 4});          // extent 1: any stride
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{0, 0}) == Pair{12, 1});               // one element
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{4, 1}) == Pair{1, 12});               // the output's own layout
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{1, 3}).at(1) == 0);                   // transposed: no
  CHECK(wrap(Shape<2>{3, 4}, Shape<2>{0, 2}).at(1) == 0);                   // a gap: no
  CHECK(wrap(Shape<3>{2, 3, 4}, Shape<3>{1, 0, 0}) == Pair{12, 2});
  CHECK(wrap(Shape<3>{2, 3, 4}, Shape<3>{1, 0, 2}).at(1) == 0);             // zeros inside the block: no
  using et::detail::wraps;
  CHECK(wraps(linear_wrap(Shape<2>{3, 4}, Shape<2>{0, 1}), Shape<2>{3, 4}));
  CHECK_FALSE(wraps(linear_wrap(Shape<2>{3, 4}, Shape<2>{4, 1}), Shape<2>{3, 4}));  // not a broadcast
  CHECK(wraps(linear_wrap(Shape<2>{3, 4}, Shape<2>{1, 0}), Shape<2>{3, 4}));
  CHECK_FALSE(wraps(linear_wrap(Shape<2>{1 << 17, 1 << 16}, Shape<2>{0, 1}), Shape<2>{1 << 17, 1 << 16}));  // 2^33
}

TEST_CASE("axes are normalized or rejected", "[layout]") {
  CHECK(et::detail::normalize_axis(-1, 3) == 2);
  CHECK(et::detail::normalize_axis(0, 3) == 0);
  CHECK_THROWS_MATCHES(et::detail::normalize_axis(3, 3), et::ShapeError,
                       Catch::Matchers::Message("et: axis 3 is out of range for a tensor of rank 3 (axes -3 to 2)"));
  CHECK_THROWS_AS(et::detail::normalize_axis(-4, 3), et::ShapeError);
  const auto t = et::zeros<float>(et::cpu, {2, 5});
  CHECK(t.size(-1) == 5);
  CHECK_THROWS_AS(t.size(2), et::ShapeError);
}
