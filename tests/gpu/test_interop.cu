// Printing, interop and joins on a GPU: the CPU tests (tests/cpu/test_print.cpp,
// test_interop.cpp, test_join.cpp) check the values; these check that the same calls work
// on cuda:0 and pinned memory and agree with the CPU, and that foreign pointers on the
// wrong side are refused.
#include <catch2/catch.hpp>

#include <et/et.hpp>
#include <et/interop/mdspan.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

using Catch::Matchers::Contains;

TEST_CASE("printing a GPU tensor: the same text as on the CPU, only the device differs", "[interop]") {
  const auto x = et::eval(et::arange<float>(et::cuda<0>, 8) * 0.5f);
  CHECK(et::to_string(x) ==
        "tensor([0.0000, 0.5000, 1.0000, 1.5000, 2.0000, 2.5000, 3.0000, 3.5000], shape=[8], dtype=float32, "
        "device=cuda:0)");
  // 2^40 elements: only the shown ones leave the GPU.
  const auto huge = et::ones<float>(et::cuda<0>, {1}).expand({std::int64_t{1} << 40});
  CHECK(et::to_string(huge) ==
        "tensor([1., 1., 1., ..., 1., 1., 1.], shape=[1099511627776], dtype=float32, device=cuda:0)");
}

TEST_CASE("DLPack on cuda:0 and pinned memory: round trips share the storage", "[interop]") {
  const auto x = et::eval(et::arange<float>(et::cuda<0>, 8) * 0.5f);
  DLManagedTensor* managed = x.to_dlpack();
  CHECK((managed->dl_tensor.device.device_type == kDLCUDA && managed->dl_tensor.device.device_id == 0));
  const auto back = et::from_dlpack<float, 1>(et::cuda<0>, managed);
  CHECK(back.data() == x.data());
  DLManagedTensor* wrong = x.to_dlpack();
  CHECK_THROWS_WITH((et::from_dlpack<float, 1>(et::cpu, wrong)), Contains("the DLPack tensor is float32, rank 1, cuda:0"));
  wrong->deleter(wrong);  // refused: still ours to release
  const auto pinned = x.to(et::pinned);
  DLManagedTensor* host = pinned.to_dlpack();
  CHECK(host->dl_tensor.device.device_type == kDLCUDAHost);
  CHECK(et::from_dlpack<float, 1>(et::pinned, host).to_vector() == x.to_vector());
}

namespace {
/// A user's kernel: doubles every element of a 2-d view, whatever its strides.
__global__ void double_each(et::mdspan_t<float, 2> v) {
  const auto i = static_cast<std::int64_t>(blockIdx.x), j = static_cast<std::int64_t>(threadIdx.x);
  if (i < v.extent(0) && j < v.extent(1)) v(i, j) *= 2.0f;
}
}  // namespace

TEST_CASE("as_mdspan: a user's kernel indexes a GPU tensor through the view, on etensor's stream", "[interop]") {
  const auto t = et::eval(et::arange<float>(et::cuda<0>, 12).reshape({3, 4}));
  const auto view = t.transpose(0, 1).slice(0, 1, 4);  // [3, 3]: columns 1..3, transposed
  double_each<<<3, 3, 0, et::current_stream(et::cuda<0>).native()>>>(et::as_mdspan(view));
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(t.to_vector() == std::vector<float>{0, 2, 4, 6, 4, 10, 12, 14, 8, 18, 20, 22});
}

TEST_CASE("from_blob on a GPU writes through, and refuses pointers of the wrong kind", "[interop]") {
  const auto x = et::eval(et::arange<float>(et::cuda<0>, 8));
  auto view = et::from_blob(et::cuda<0>, x.data(), {2, 4});
  view *= 2.0f;
  CHECK(x.to_vector()[7] == 14.0f);
  std::vector<float> host(4);
  CHECK_THROWS_WITH(et::from_blob(et::cuda<0>, host.data(), {4}), Contains("the pointer is host memory"));
  CHECK_THROWS_WITH(et::from_blob(et::cpu, x.data(), {8}), Contains("the pointer is memory of cuda:0"));
  CHECK_THROWS_WITH(et::from_blob(et::pinned, host.data(), {4}), Contains("not page-locked host memory"));
}

TEST_CASE("cat, stack, pad and one_hot on a GPU agree with the CPU, gradients too", "[interop][join]") {
  for (const std::int64_t n : {0, 1, 7, 1000}) {
    CAPTURE(n);
    const auto a = et::randn<float>(et::cpu, {n, 3}, 1), b = et::randn<float>(et::cpu, {2, 3}, 2);
    const auto ga = a.to(et::cuda<0>), gb = b.to(et::cuda<0>);
    CHECK(et::cat({ga, gb}, 0).to_vector() == et::cat({a, b}, 0).to_vector());
    CHECK(et::cat({ga.transpose(0, 1), gb.transpose(0, 1)}, 1).to_vector() ==
          et::cat({a.transpose(0, 1), b.transpose(0, 1)}, 1).to_vector());
    CHECK(et::stack({ga, ga}, 2).to_vector() == et::stack({a, a}, 2).to_vector());
    CHECK(et::pad(ga, {{{1, 2}, {0, 3}}}, 5.0f).to_vector() == et::pad(a, {{{1, 2}, {0, 3}}}, 5.0f).to_vector());
  }
  const auto labels = et::from_vector(et::cpu, std::vector<std::int64_t>{3, 0, 2, 2, 1});
  CHECK(et::one_hot(labels.to(et::cuda<0>), 4).to_vector() == et::one_hot(labels, 4).to_vector());
  CHECK_THROWS_WITH(et::one_hot(labels.to(et::cuda<0>), 3), Contains("labels range over [0, 3], outside [0, 3)"));

  auto x = et::randn<double>(et::cpu, {3, 4}, 5);
  auto gx = x.to(et::cuda<0>);
  x.requires_grad_(true);
  gx.requires_grad_(true);
  et::sum(et::square(et::cat({x, x.slice(0, 1, 3)}, 0))).backward();
  et::sum(et::square(et::cat({gx, gx.slice(0, 1, 3)}, 0))).backward();
  const auto cpu = x.grad().to_vector(), gpu = gx.grad().to_vector();
  REQUIRE(cpu.size() == gpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) CHECK(std::abs(cpu[i] - gpu[i]) <= 1e-12 * (1 + std::abs(cpu[i])));
}
