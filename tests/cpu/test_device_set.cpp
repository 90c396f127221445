// et::DeviceSet on the host: Cpu and Pinned are distinct device types, so a set of both
// exercises every step of scatter and gather that does not need a GPU (tests/gpu runs the
// same cases on GPUs).
#include "../common/device_set_cases.hpp"

#include <catch2/catch.hpp>

using HostPair = et::DeviceSet<et::Cpu, et::Pinned>;
using PinnedFirst = et::DeviceSet<et::Pinned, et::Cpu>;

TEST_CASE("DeviceSet: its devices, by type and index", "[device-set]") {
  STATIC_REQUIRE(HostPair::size() == 2);
  STATIC_REQUIRE(std::is_same_v<HostPair::first_device, et::Cpu>);
  STATIC_REQUIRE(std::is_same_v<HostPair::device<1>, et::Pinned>);
  STATIC_REQUIRE(HostPair::contains<et::Pinned> && !HostPair::contains<et::Cuda<0>>);
  STATIC_REQUIRE(std::is_same_v<et::FirstCudaDevices<3>, et::DeviceSet<et::Cuda<0>, et::Cuda<1>, et::Cuda<2>>>);
  STATIC_REQUIRE(et::FirstCudaDevices<3>::indices() == std::array<int, 3>{0, 1, 2});
  CHECK(et::DeviceSet<et::Cpu, et::Pinned, et::Cuda<0>>::balanced(7) == std::array<std::int64_t, 3>{3, 2, 2});
  CHECK(HostPair::balanced(0) == std::array<std::int64_t, 2>{0, 0});
  CHECK_THROWS_AS(HostPair::balanced(-1), et::ShapeError);
}

TEST_CASE("DeviceSet: scatter and gather copy every row to its device and back", "[device-set]") {
  test::check_device_set_copies<HostPair>();
  test::check_device_set_copies<PinnedFirst>();
  test::check_device_set_copies<et::DeviceSet<et::Cpu>>();
}

TEST_CASE("DeviceSet: bad rows and mismatched pieces are et::ShapeError", "[device-set][errors]") {
  test::check_device_set_errors<HostPair>();
  test::check_device_set_errors<et::DeviceSet<et::Cpu>>();
}

TEST_CASE("DeviceSet: gradients flow back through gather and scatter", "[device-set][autograd]") {
  test::check_device_set_gradients<HostPair>();
  test::check_device_set_gradients<PinnedFirst>();
}

TEST_CASE("DeviceSet: with_visible_devices gives the set of the GPUs seen, at most Max", "[device-set]") {
  auto count = [](auto set) { return int(set.size()); };
  if (et::device_count() == 0) {
    CHECK_THROWS_WITH(et::with_visible_devices<4>(count), Catch::Contains("sees no CUDA device"));
  } else {
    CHECK(et::with_visible_devices<4>(count) == std::min(et::device_count(), 4));
    CHECK(et::with_visible_devices<1>(count) == 1);
  }
}
