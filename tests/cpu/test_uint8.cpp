// uint8, the element type of image files (data::read_idx_images): arithmetic that wraps
// modulo 256, scalars that must fit, casts that saturate, reductions to int64, order
// (sort, argmax, max above 127), printing as numbers, and uint8 through DLPack and
// safetensors. Promotion with every other type is in test_dtypes.cpp and the random
// promotion family.
#include "../common/reference.hpp"

#include <et/et.hpp>
#include <et/interop/dlpack.hpp>
#include <et/nn.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {

using Bytes = std::vector<std::uint8_t>;

et::Tensor<std::uint8_t, 1> bytes(const Bytes& values) {
  return et::from_vector(et::cpu, values, {static_cast<std::int64_t>(values.size())});
}

}  // namespace

TEST_CASE("uint8: arithmetic wraps modulo 256, as PyTorch's", "[dtypes][uint8]") {
  const auto a = bytes({200, 3, 0, 255, 128}), b = bytes({100, 5, 1, 1, 2});
  CHECK(et::eval(a + b).to_vector() == Bytes{44, 8, 1, 0, 130});
  CHECK(et::eval(a - b).to_vector() == Bytes{100, 254, 255, 254, 126});
  CHECK(et::eval(a * b).to_vector() == Bytes{32, 15, 0, 255, 0});
  CHECK(et::eval(-a).to_vector() == Bytes{56, 253, 0, 1, 128});
  CHECK(et::eval(et::abs(a)).to_vector() == a.to_vector());
  CHECK(et::eval(et::relu(a)).to_vector() == a.to_vector());
  CHECK(et::eval(et::square(b)).to_vector() == Bytes{16, 25, 1, 1, 4});
  CHECK(et::eval(et::maximum(a, b)).to_vector() == Bytes{200, 5, 1, 255, 128});
  CHECK(et::eval(a > b).to_vector() == std::vector<bool>{true, false, false, true, true});
  // True division and math functions give float; a floating scalar lifts to float.
  CHECK(et::eval(a / b).to_vector() == std::vector<float>{2.0f, 0.6f, 0.0f, 255.0f, 64.0f});
  CHECK(et::eval(a * 0.5).to_vector() == std::vector<float>{100.0f, 1.5f, 0.0f, 127.5f, 64.0f});
  // With a signed tensor, uint8 promotes to it: 200 stays 200 (not -56).
  const auto c = et::from_vector(et::cpu, std::vector<std::int32_t>{-300, 1, 2, 3, 4}, {5});
  CHECK(et::eval(a + c).to_vector() == std::vector<std::int32_t>{-100, 4, 2, 258, 132});
  CHECK(et::eval(a < c).to_vector() == std::vector<bool>{false, false, true, false, false});
  auto d = bytes({250, 1});
  d += 10;  // in place, wrapping
  CHECK(d.to_vector() == Bytes{4, 11});
}

TEST_CASE("uint8: an integer scalar must fit; the message says the range", "[dtypes][uint8][errors]") {
  const auto a = bytes({1, 2});
  CHECK(et::eval(a + 255).to_vector() == Bytes{0, 1});
  CHECK_THROWS_AS(et::eval(a + 256), et::Error);
  CHECK_THROWS_WITH(et::eval(a + 256), Contains("256 does not fit an 8-bit unsigned integer tensor (range 0 to 255)"));
  CHECK_THROWS_WITH(et::eval(a * -1), Contains("-1 does not fit an 8-bit unsigned integer tensor"));
  CHECK_THROWS_WITH(et::full<std::uint8_t>(et::cpu, {2}, 256.0), Contains("full: 256 does not fit"));
  CHECK_THROWS_WITH(et::full<std::uint8_t>(et::cpu, {2}, -0.5), Contains("does not fit"));
  CHECK(et::full<std::uint8_t>(et::cpu, {2}, 255.75).to_vector() == Bytes{255, 255});  // in range: truncates
  // Beside an int32 tensor, the scalar must fit int32.
  const auto c = et::from_vector(et::cpu, std::vector<std::int32_t>{1}, {1});
  CHECK_THROWS_WITH(et::eval(c + (std::int64_t{1} << 40)), Contains("a scalar operand") && Contains("32-bit"));
  CHECK(et::full<std::uint8_t>(et::cpu, {1}, 0.0).to_vector() == Bytes{0});
}

TEST_CASE("uint8: casts from floating types truncate and saturate; from integers they wrap", "[dtypes][uint8][cast]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto f = et::from_vector(et::cpu, std::vector<float>{-1, -0.5f, 0.5f, 254.9f, 255.5f, 256, 1e10f, nan, inf, -inf, 17.99f},
                                 {11});
  CHECK(et::eval(et::cast<std::uint8_t>(f)).to_vector() == Bytes{0, 0, 0, 254, 255, 255, 255, 0, 255, 0, 17});
  const auto d = et::from_vector(et::cpu, std::vector<double>{-1e300, 255.999, 1e300}, {3});
  CHECK(et::eval(et::cast<std::uint8_t>(d)).to_vector() == Bytes{0, 255, 255});
  const auto i = et::from_vector(et::cpu, std::vector<std::int64_t>{-1, 256, 257, 1000, -256}, {5});
  CHECK(et::eval(et::cast<std::uint8_t>(i)).to_vector() == Bytes{255, 0, 1, 232, 0});
  const auto back = bytes({0, 127, 128, 255});
  CHECK(et::eval(et::cast<float>(back)).to_vector() == std::vector<float>{0, 127, 128, 255});
  CHECK(et::eval(et::cast<std::int32_t>(back) - 128).to_vector() == std::vector<std::int32_t>{-128, -1, 0, 127});
  CHECK(et::eval(et::cast<bool>(back)).to_vector() == std::vector<bool>{false, true, true, true});
}

TEST_CASE("uint8: reductions sum to int64; max, argmax and sort order values above 127 last", "[dtypes][uint8][reduce]") {
  const auto many = et::full<std::uint8_t>(et::cpu, {1000}, 255);
  const et::Tensor<std::int64_t, 0> total = et::sum(many);
  CHECK(total.item() == 255000);
  CHECK(et::sum(et::cast<std::int32_t>(many)).item() == 255000);
  const auto a = bytes({3, 250, 7, 128, 127, 0});
  CHECK(et::max(a).item() == 250);
  CHECK(et::min(a).item() == 0);
  const auto rows = et::from_vector(et::cpu, Bytes{3, 250, 7, 200, 1, 129}, {2, 3});
  CHECK(et::argmax(rows, 1).to_vector() == std::vector<std::int64_t>{1, 0});
  CHECK(et::argmin(rows, 1).to_vector() == std::vector<std::int64_t>{0, 1});
  const auto sorted = et::sort(a);
  CHECK(sorted.values.to_vector() == Bytes{0, 3, 7, 127, 128, 250});
  CHECK(sorted.indices.to_vector() == std::vector<std::int64_t>{5, 0, 2, 4, 3, 1});
  CHECK(et::topk(a, 2).values.to_vector() == Bytes{250, 128});
  CHECK(et::cumsum(a, 0).to_vector() == std::vector<std::int64_t>{3, 253, 260, 388, 515, 515});
  // A mean needs a floating type, as PyTorch's: the images are cast first.
  CHECK(et::mean(et::cast<float>(a) / 255.0f).item() == Approx(515.0 / 6 / 255).epsilon(1e-6));
}

TEST_CASE("uint8: printed as numbers, named uint8", "[dtypes][uint8][print]") {
  std::ostringstream out;
  out << bytes({0, 65, 255});
  CHECK(out.str() == "tensor([  0,  65, 255], shape=[3], dtype=uint8, device=cpu)");
  CHECK(et::dtype_name<std::uint8_t> == std::string("uint8"));
}

TEST_CASE("uint8: through DLPack (kDLUInt) and safetensors (U8)", "[dtypes][uint8][dlpack][io]") {
  const auto a = bytes({9, 200, 255});
  DLManagedTensor* m = a.to_dlpack();
  CHECK((m->dl_tensor.dtype.code == kDLUInt && m->dl_tensor.dtype.bits == 8 && m->dl_tensor.dtype.lanes == 1));
  CHECK(et::from_dlpack<std::uint8_t, 1>(et::cpu, m).to_vector() == Bytes{9, 200, 255});
  DLManagedTensor* s = a.to_dlpack();
  CHECK_THROWS_WITH((et::from_dlpack<bool, 1>(et::cpu, s)), Contains("uint8"));
  s->deleter(s);  // refused: still the caller's
  DLManagedTensor* i = et::arange<std::int64_t>(et::cpu, 3).to_dlpack();
  CHECK_THROWS_AS((et::from_dlpack<std::uint8_t, 1>(et::cpu, i)), et::Error);
  i->deleter(i);

  struct Images : et::nn::Module<Images> {
    et::Tensor<std::uint8_t, 2> pixels;
    auto members() { return et::nn::members("pixels", pixels); }
  };
  Images saved, loaded;
  saved.pixels = et::from_vector(et::cpu, Bytes{0, 1, 128, 255}, {2, 2});
  loaded.pixels = et::zeros<std::uint8_t>(et::cpu, {2, 2});
  const std::string path = "test_uint8.safetensors";
  et::nn::save(saved, path);
  const auto file = et::io::read_safetensors(path);
  CHECK(file.tensors.at("pixels").dtype == "U8");
  et::nn::load(loaded, path);
  CHECK(loaded.pixels.to_vector() == Bytes{0, 1, 128, 255});
  std::remove(path.c_str());
}
