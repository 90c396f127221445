// Inputs that were once silently wrong or undefined behaviour (issue 16's list), each now a
// clear et:: exception, and the valid neighbours of each still working.
#include "../common/files.hpp"

#include <catch2/catch.hpp>

#include <et/et.hpp>
#include <et/nn.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
}

TEST_CASE("an undefined tensor is an error wherever it is an operand, not an empty tensor", "[errors][undefined]") {
  const et::Tensor<float, 1, et::Cpu> u;
  const auto x = et::ones<float>(et::cpu, {3});
  const std::string undefined = "undefined (default-constructed) tensor";
  CHECK_THROWS_WITH(et::eval(u + 1.0f), Contains(undefined));
  CHECK_THROWS_WITH((et::Tensor<float, 1, et::Cpu>(u * 2.0f)), Contains(undefined));
  CHECK_THROWS_WITH(et::eval(et::where(u > 0.0f, 1.0f, 0.0f)), Contains(undefined));
  CHECK_THROWS_WITH(x + u, Contains(undefined));
  CHECK_THROWS_WITH(et::max(u), Contains(undefined));
  CHECK_THROWS_WITH(et::sum(u), Contains(undefined));
  CHECK_THROWS_WITH(et::sum(u, 0), Contains(undefined));
  et::Tensor<float, 1, et::Cpu> target;
  CHECK_THROWS_WITH(target = 1.0f, Contains("assigning a scalar") && Contains(undefined));
  CHECK_THROWS_WITH(target.copy_(x), Contains("copy_()") && Contains(undefined));
  CHECK_THROWS_WITH(target += 1.0f, Contains(undefined));
  CHECK_FALSE(target.defined());
  target = x * 2.0f;  // an expression gives an undefined tensor its shape: still allowed
  CHECK(target.to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("scalars an integer tensor cannot hold are an error, not undefined behaviour", "[errors][creation]") {
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, 1e10), Contains("full") && Contains("does not fit a 32-bit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, std::nan("")), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, -INFINITY), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, 2147483648.0), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int32_t>(et::cpu, {3}, std::int64_t{1} << 40), Contains("does not fit"));
  CHECK_THROWS_WITH(et::full<std::int64_t>(et::cpu, {1}, 9.3e18), Contains("does not fit a 64-bit"));
  CHECK(et::full<std::int32_t>(et::cpu, {1}, 2147483647.0).item() == 2147483647);
  CHECK(et::full<std::int32_t>(et::cpu, {1}, -2147483648.0).item() == -2147483647 - 1);
  CHECK(et::full<std::int32_t>(et::cpu, {1}, 2.9).item() == 2);  // in range: truncates, as C++ does
  CHECK(et::full<bool>(et::cpu, {1}, 1e10).item() == true);
  auto ints = et::zeros<std::int32_t>(et::cpu, {2});
  CHECK_THROWS_WITH(ints = 1e10, Contains("assigning a scalar") && Contains("does not fit"));
  CHECK(ints.to_vector() == std::vector<std::int32_t>{0, 0});  // unchanged
  // arange: every value must fit, and a wild count reads as a number, not 300 digits.
  CHECK_THROWS_WITH(et::arange<std::int32_t>(et::cpu, 0.0, 4e9, 1e9), Contains("arange's last value"));
  CHECK(et::arange<std::int32_t>(et::cpu, 0.0, 3e9, 1e9).to_vector() == std::vector<std::int32_t>{0, 1000000000, 2000000000});
  try {
    (void)et::arange<float>(et::cpu, 0.0, 1e300, 1e-10);
    FAIL("expected et::ShapeError");
  } catch (const et::ShapeError& e) {
    const std::string message = e.what();
    CHECK(message.size() < 160);
    CHECK_THAT(message, Contains("elements"));
  }
}

TEST_CASE("shape arithmetic that would overflow int64 is a ShapeError", "[errors][views]") {
  const auto one = et::ones<float>(et::cpu, {1, 1});
  CHECK_THROWS_WITH(one.expand({std::int64_t{1} << 62, std::int64_t{1} << 62}),
                    Contains("more elements than fit in 64 bits"));
  CHECK(one.expand({std::int64_t{1} << 31, 4}).numel() == (std::int64_t{1} << 33));  // a large view is fine
  CHECK_THROWS_WITH(et::empty<float>(et::cpu, {0, int64_max, 4}), Contains("do not fit in 64 bits"));
  CHECK(et::empty<float>(et::cpu, {0, 5, 4}).strides() == std::array<std::int64_t, 3>{20, 4, 1});
  const auto x = et::ones<float>(et::cpu, {1, 2, 5, 5}), w = et::ones<float>(et::cpu, {3, 2, 3, 3});
  CHECK_THROWS_WITH(et::conv2d(x, w, {.padding = {int64_max / 2, 1}}), Contains("conv2d") && Contains("past 64 bits"));
  CHECK_THROWS_WITH(et::conv2d(x, w, {.dilation = {int64_max / 2 + 1, 1}}), Contains("past 64 bits"));
  CHECK_THROWS_WITH(et::max_pool2d(x, {.kernel = {int64_max, 2}, .padding = {int64_max / 2, 0}}),
                    Contains("past 64 bits"));
  CHECK(et::conv2d(x, w, {.padding = {1, 1}}).shape() == et::Shape<4>{1, 3, 5, 5});
}

TEST_CASE("a reduction's axis error names the operation and the shape", "[errors][reductions]") {
  const auto x = et::ones<float>(et::cpu, {2, 3});
  CHECK_THROWS_WITH(et::sum(x, 2), Contains("et: sum: axis 2 is out of range for shape [2, 3] of rank 2"));
  CHECK_THROWS_WITH(et::max(x, -3), Contains("max") && Contains("[2, 3]") && Contains("axes -2 to 1"));
  CHECK(et::sum(x, -1).to_vector() == std::vector<float>{3, 3});
}

// Issue 47: the same kind of inputs, found by a second probe under ASan and UBSan.

TEST_CASE("load_state checks each entry's bytes against its shape before copying any", "[errors][safetensors]") {
  et::nn::Linear<float, et::Cpu> layer(et::cpu, 3, 2, 1);  // weight [2, 3], bias [2]
  const auto weight = layer.weight.to_vector();
  auto file = et::nn::state_of(layer);
  for (const std::size_t size : {std::size_t{1000}, std::size_t{4}, std::size_t{0}}) {
    CAPTURE(size);
    file.tensors.at("weight").bytes.assign(size, 0);
    CHECK_THROWS_WITH(et::nn::load_state(layer, file, "memory"),
                      Contains("\"weight\" in memory has " + std::to_string(size) + " bytes") &&
                          Contains("F32 [2, 3] needs 24"));
    CHECK(layer.weight.to_vector() == weight);  // untouched
  }
  file.tensors.at("weight").bytes.assign(24, 0);
  et::nn::load_state(layer, file, "memory");
  CHECK(layer.weight.to_vector() == std::vector<float>(6, 0.0f));
}

TEST_CASE("loading a directory is an et::Error naming it", "[errors][safetensors]") {
  et::nn::Linear<float, et::Cpu> layer(et::cpu, 3, 2, 1);
  const std::string directory = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(et::nn::load(layer, directory), Contains(directory) && Contains("a directory, not a file"));
  CHECK_THROWS_AS(et::io::read_safetensors(directory), et::Error);
}

TEST_CASE("a safetensors shape past 64 bits of bytes says so, reading and writing", "[errors][safetensors]") {
  const std::string header = R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})";
  std::vector<unsigned char> bytes(8);
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  CHECK_THROWS_WITH(et::io::parse_safetensors(bytes, "f.safetensors"),
                    Contains("its shape [4294967296, 4294967296, 2] of F32 needs more bytes than fit in 64 bits"));
  // 2^62 elements fit in 64 bits, their 2^64 bytes do not: once they wrapped to 0 and
  // matched an empty entry.
  et::io::SafeTensorsFile file;
  file.tensors["w"] = {"F32", {std::int64_t{1} << 62}, {}};
  CHECK_THROWS_WITH(et::io::serialize_safetensors(file), Contains("tensor \"w\" has 0 bytes, not its shape's"));
}

TEST_CASE("pooling with a padding whose double overflows is the padding's ShapeError", "[errors][conv]") {
  const auto x = et::ones<float>(et::cpu, {1, 1, 4, 4});
  CHECK_THROWS_WITH(et::max_pool2d(x, {.kernel = {3, 3}, .padding = {int64_max, 0}}),
                    Contains("padding must be non-negative and at most half the kernel"));
  CHECK_THROWS_WITH(et::avg_pool2d(x, {.kernel = {2, 2}, .padding = {0, int64_max / 2 + 1}}), Contains("at most half"));
  CHECK(et::max_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}).shape() == et::Shape<4>{1, 1, 4, 4});
}

TEST_CASE("int64 sums that overflow wrap around (as in PyTorch), not undefined behaviour", "[errors][index][scan]") {
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const auto big = et::full<std::int64_t>(et::cpu, {2}, int64_max);
  CHECK(et::cumsum(big, 0).to_vector() == std::vector<std::int64_t>{int64_max, -2});
  const auto at_zero = et::zeros<std::int64_t>(et::cpu, {2});
  CHECK(et::scatter_add(big, 0, at_zero, big).to_vector() == std::vector<std::int64_t>{int64_max - 2, int64_max});
  const auto low = et::full<std::int32_t>(et::cpu, {2}, std::numeric_limits<std::int32_t>::min());
  CHECK(et::scatter_add(low, 0, at_zero.slice(0, 0, 1), low.slice(0, 0, 1)).to_vector() ==
        std::vector<std::int32_t>{0, std::numeric_limits<std::int32_t>::min()});
  CHECK(et::cumsum(et::full<std::int64_t>(et::cpu, {2}, lowest), 0).to_vector() ==
        std::vector<std::int64_t>{lowest, 0});
}

TEST_CASE("an empty shape with huge extents has strides without overflow", "[errors][creation]") {
  const auto empty = et::empty<float>(et::cpu, {int64_max, 2, 0});
  CHECK(empty.numel() == 0);
  CHECK(empty.strides() == std::array<std::int64_t, 3>{2, 1, 1});
  CHECK(et::empty<float>(et::cpu, {2, int64_max, 0}).numel() == 0);
}

TEST_CASE("cast to an integer saturates out-of-range values and gives 0 for NaN", "[errors][dtypes]") {
  const float inf = std::numeric_limits<float>::infinity();
  const auto x =
      et::from_vector(et::cpu, std::vector<float>{inf, -inf, std::nanf(""), 1e10f, -1e10f, 2.9f, -2.9f}, {7});
  const std::int32_t i32_max = std::numeric_limits<std::int32_t>::max();
  const std::int32_t i32_min = std::numeric_limits<std::int32_t>::min();
  const std::int64_t i64_min = std::numeric_limits<std::int64_t>::min();
  CHECK(et::eval(et::cast<std::int32_t>(x)).to_vector() ==
        std::vector<std::int32_t>{i32_max, i32_min, 0, i32_max, i32_min, 2, -2});
  CHECK(et::eval(et::cast<std::int64_t>(x)).to_vector() ==
        std::vector<std::int64_t>{int64_max, i64_min, 0, 10000000000, -10000000000, 2, -2});
  const auto d = et::from_vector(et::cpu, std::vector<double>{2147483647.5, -2147483648.5, 9.3e18, -9.3e18}, {4});
  CHECK(et::eval(et::cast<std::int32_t>(d)).to_vector() ==
        std::vector<std::int32_t>{i32_max, i32_min, i32_max, i32_min});
  CHECK(et::eval(et::cast<std::int64_t>(d)).to_vector() ==
        std::vector<std::int64_t>{2147483647, -2147483648, int64_max, i64_min});
  const auto h = et::eval(et::cast<et::half>(et::from_vector(et::cpu, std::vector<float>{inf, std::nanf("")}, {2})));
  CHECK(et::eval(et::cast<std::int32_t>(h)).to_vector() == std::vector<std::int32_t>{i32_max, 0});
  CHECK(et::eval(et::cast<bool>(x)).to_vector() == std::vector<bool>{true, true, true, true, true, true, true});
}

TEST_CASE("mse_loss of an undefined tensor says so", "[errors][undefined]") {
  const et::Tensor<float, 1, et::Cpu> u;
  const auto x = et::ones<float>(et::cpu, {3});
  CHECK_THROWS_WITH(et::nn::mse_loss(u, x), Contains("mse_loss") && Contains("undefined (default-constructed) tensor"));
  CHECK_THROWS_WITH(et::nn::mse_loss(x, u), Contains("mse_loss") && Contains("undefined"));
}

TEST_CASE("module sizes whose products pass int64 are refused before they are used", "[errors][nn]") {
  const std::int64_t big = std::int64_t(1) << 62, bigger = std::int64_t(1) << 61;
  CHECK_THROWS_WITH((et::nn::LSTM<float, et::Cpu>(et::cpu, 1, big)),
                    Contains("et: LSTM: 4 * hidden_size = 4 * 4611686018427387904 does not fit in 64 bits"));
  CHECK_THROWS_WITH((et::nn::LSTM<float, et::Cpu>(et::cpu, 1, bigger)), Contains("does not fit in 64 bits"));
  CHECK_THROWS_WITH((et::nn::Conv2d<float, et::Cpu>(et::cpu, 1, 1, std::int64_t(1) << 32)),
                    Contains("et: Conv2d: in_channels / groups * kernel height * kernel width") &&
                        Contains("does not fit in 64 bits"));
  // fans in double: the expanded view is reported as what it is, a destination that overlaps
  const auto expanded = et::zeros<float>(et::cpu, {1, 1, 2}).expand({1, (std::int64_t(1) << 62) - 1, 2});
  CHECK_THROWS_WITH(et::nn::init::xavier_uniform_(expanded, 1), Contains("overlap in memory"));
  CHECK_THROWS_WITH(et::nn::init::kaiming_normal_(expanded, 1), Contains("overlap in memory"));
}

TEST_CASE("messages name the operation the user called", "[errors][nn]") {
  et::nn::Embedding<float, et::Cpu> embedding(et::cpu, 10, 3, 1);
  CHECK_THROWS_WITH(embedding(et::from_vector(et::cpu, std::vector<std::int64_t>{1, 12}, {2})),
                    Contains("et: embedding: indices range over [1, 12], outside [0, 10)"));
  const std::string nul = test::temporary_path("model.safetensors") + std::string(1, '\0') + "x";
  et::nn::Linear<float, et::Cpu> layer(et::cpu, 3, 2, 1);
  CHECK_THROWS_WITH(et::nn::save(layer, nul), Contains("et: write_safetensors") && Contains("holds a NUL byte"));
  CHECK_THROWS_WITH(et::nn::load(layer, nul), Contains("et: read_safetensors") && Contains("holds a NUL byte"));
}
