// Modules and the data loader on the CPU (the cases are shared with the GPU tests:
// module_cases.hpp, lstm_cases.hpp, loader_cases.hpp), and the
// safetensors format: byte-exact against the reference implementation's own test vectors,
// round trips through modules, and every kind of bad file.
#include "../common/files.hpp"
#include "../common/batch_norm_cases.hpp"
#include "../common/init_cases.hpp"
#include "../common/loader_cases.hpp"
#include "../common/lstm_cases.hpp"
#include "../common/module_cases.hpp"
#include "../common/table7_cases.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

TEST_CASE("modules: Linear against a double-precision reference (CPU)", "[nn][modules]") { test::check_linear<et::Cpu>(); }
TEST_CASE("modules: members, parameters, to, train/eval, Sequential (CPU)", "[nn][modules]") {
  test::check_module_semantics<et::Cpu>();
}
TEST_CASE("modules: an empty batch gives zero gradients to conv, pooling and LSTM parameters (CPU)",
          "[nn][modules]") {
  test::check_empty_batch_gradients<et::Cpu>();
}
TEST_CASE("modules: Dropout (CPU)", "[nn][modules]") { test::check_dropout<et::Cpu>(); }
TEST_CASE("modules: Embedding (CPU)", "[nn][modules]") { test::check_embedding<et::Cpu>(); }
TEST_CASE("modules: AdaptiveAvgPool2d (CPU)", "[nn][modules]") { test::check_adaptive_avg_pool<et::Cpu>(); }
TEST_CASE("modules: ModuleList (CPU)", "[nn][modules]") { test::check_module_list<et::Cpu>(); }
TEST_CASE("modules: LSTM against a double-precision reference (CPU)", "[nn][lstm]") {
  test::check_lstm_against_reference<et::Cpu>();
}
TEST_CASE("modules: LSTM parameters, state, bad input (CPU)", "[nn][lstm]") { test::check_lstm_module<et::Cpu>(); }
TEST_CASE("modules: LSTM gradients against central differences (CPU)", "[nn][lstm]") {
  test::check_lstm_gradients<et::Cpu>();
}
TEST_CASE("Table 7 networks: FCN-R, AlexNet-R, ResNet-56 (CPU)", "[nn][table7]") {
  test::check_table7_small_networks<et::Cpu>();
}
TEST_CASE("modules: BatchNorm2d (CPU)", "[nn][modules]") { test::check_batch_norm<et::Cpu>(); }
TEST_CASE("batch_norm, with ReLU and a residual, in every type, against a reference (CPU)", "[nn][batch_norm]") {
  test::check_batch_norm_forms<et::Cpu>(false);
}
TEST_CASE("modules: Conv2d, pooling, Flatten (CPU)", "[nn][modules]") { test::check_conv_pool_flatten<et::Cpu>(); }
TEST_CASE("modules: a Sequential model trains (CPU)", "[nn][modules]") { test::check_module_training<et::Cpu>(); }
TEST_CASE("nn::init: Xavier and Kaiming fills, gains, fans (CPU)", "[nn][init]") { test::check_init<et::Cpu>(); }
TEST_CASE("data loader: batches, seeded shuffles, progress, function datasets (CPU)", "[data]") {
  test::check_loader<et::Cpu>();
}

namespace {

std::vector<unsigned char> le_floats(std::initializer_list<float> values) {
  std::vector<unsigned char> out(values.size() * 4);
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

using test::temporary_path;
using test::write_bytes;

}  // namespace

TEST_CASE("safetensors: the bytes of the reference implementation's own tests", "[nn][safetensors]") {
  // safetensors/src/tensor.rs, test_serialization and test_empty.
  et::io::SafeTensorsFile file;
  file.tensors["attn.0"] = {"F32", {1, 2, 3}, le_floats({0, 1, 2, 3, 4, 5})};
  const std::vector<unsigned char> expected{
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34, 58, 34,
      70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95,
      111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0,
      64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  CHECK(et::io::serialize_safetensors(file) == expected);
  const auto parsed = et::io::parse_safetensors(expected, "vector");
  REQUIRE(parsed.tensors.size() == 1);
  CHECK(parsed.tensors.at("attn.0").shape == std::vector<std::int64_t>{1, 2, 3});
  CHECK(parsed.tensors.at("attn.0").bytes == le_floats({0, 1, 2, 3, 4, 5}));

  et::io::SafeTensorsFile empty;
  CHECK(et::io::serialize_safetensors(empty) == std::vector<unsigned char>{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32,
                                                                           32, 32, 32, 32});
  empty.metadata["framework"] = "pt";
  const std::vector<unsigned char> with_metadata{40,  0,   0,   0,   0,   0,   0,   0,   123, 34,  95,  95,
                                                 109, 101, 116, 97,  100, 97,  116, 97,  95,  95,  34,  58,
                                                 123, 34,  102, 114, 97,  109, 101, 119, 111, 114, 107, 34,
                                                 58,  34,  112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
  CHECK(et::io::serialize_safetensors(empty) == with_metadata);
  CHECK(et::io::parse_safetensors(with_metadata, "vector").metadata.at("framework") == "pt");
}

TEST_CASE("safetensors: the data order is the reference's (dtype order descending, then name)", "[nn][safetensors]") {
  et::io::SafeTensorsFile file;
  file.tensors["b"] = {"F32", {1}, le_floats({1})};
  file.tensors["a"] = {"F32", {1}, le_floats({2})};
  file.tensors["c"] = {"I64", {}, std::vector<unsigned char>(8, 7)};
  file.tensors["d"] = {"BOOL", {2}, {1, 0}};
  const auto bytes = et::io::serialize_safetensors(file);
  const std::string header(bytes.begin() + 8, bytes.end() - 18);
  CHECK(header.rfind(R"({"c":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"b":)", 0) == 0);
  CHECK((header.size() % 8 == 0 && header.back() == ' '));
  CHECK(et::io::parse_safetensors(bytes, "order").tensors.at("d").bytes == std::vector<unsigned char>{1, 0});
}

TEST_CASE("safetensors: save and load a module (CPU)", "[nn][safetensors]") {
  const std::string path = temporary_path("model.safetensors");
  et::nn::Sequential model(et::nn::Linear<float, et::Cpu>(et::cpu, 3, 4, 1), et::nn::ReLU{},
                           et::nn::BatchNorm2d<float, et::Cpu>(et::cpu, 2));
  model.get<2>().running_mean.detach() += 0.5f;
  et::nn::save(model, path, {{"format", "pt"}});
  const auto file = et::io::read_safetensors(path);
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.tensors.at("0.weight").dtype == "F32");
  CHECK(file.tensors.at("2.num_batches_tracked").dtype == "I64");
  CHECK(file.tensors.size() == 7);

  decltype(model) other(et::nn::Linear<float, et::Cpu>(et::cpu, 3, 4, 2), et::nn::ReLU{},
                        et::nn::BatchNorm2d<float, et::Cpu>(et::cpu, 2));
  REQUIRE(other.get<0>().weight.to_vector() != model.get<0>().weight.to_vector());
  et::nn::load(other, path);
  CHECK(other.get<0>().weight.to_vector() == model.get<0>().weight.to_vector());
  CHECK(other.get<0>().bias.to_vector() == model.get<0>().bias.to_vector());
  CHECK(other.get<2>().running_mean.to_vector() == std::vector<float>{0.5f, 0.5f});
  CHECK(other.get<0>().weight.requires_grad());

  // A file that does not fit the module changes nothing and names the problem.
  et::nn::Linear<float, et::Cpu> wrong_shape(et::cpu, 4, 4, 3);
  const auto before = wrong_shape.weight.to_vector();
  et::nn::Sequential<et::nn::Linear<float, et::Cpu>> one(wrong_shape);
  CHECK_THROWS_WITH(et::nn::load(one, path), Catch::Contains("\"0.weight\"") && Catch::Contains("F32 [4, 3]") &&
                                                  Catch::Contains("F32 [4, 4]"));
  CHECK(one.get<0>().weight.to_vector() == before);
  et::nn::Sequential<et::nn::Linear<double, et::Cpu>> doubles(et::nn::Linear<double, et::Cpu>(et::cpu, 3, 4));
  CHECK_THROWS_WITH(et::nn::load(doubles, path), Catch::Contains("is F32 [4, 3], the module's is F64 [4, 3]"));
  et::nn::Sequential<et::nn::Linear<float, et::Cpu>> part(et::nn::Linear<float, et::Cpu>(et::cpu, 3, 4));
  CHECK_THROWS_WITH(et::nn::load(part, path), Catch::Contains("holds tensors the module does not: \"2.bias\""));
  et::nn::load(part, path, {.strict = false});
  CHECK(part.get<0>().weight.to_vector() == model.get<0>().weight.to_vector());
  et::nn::Linear<float, et::Cpu> renamed(et::cpu, 3, 4);
  CHECK_THROWS_WITH(et::nn::load(renamed, path), Catch::Contains("has no tensor \"weight\""));
  CHECK_THROWS_WITH(et::nn::load(renamed, temporary_path("missing.safetensors")), Catch::Contains("cannot open"));
  std::remove(path.c_str());
}

TEST_CASE("safetensors: bad files throw et::Error naming the problem", "[nn][safetensors]") {
  et::io::SafeTensorsFile file;
  file.tensors["w"] = {"F32", {2}, le_floats({1, 2})};
  const auto good = et::io::serialize_safetensors(file);
  auto with_header = [&](const std::string& header) {
    std::vector<unsigned char> bytes(8);
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes.insert(bytes.end(), header.begin(), header.end());
    const auto data = le_floats({1, 2});
    bytes.insert(bytes.end(), data.begin(), data.end());
    return bytes;
  };
  auto fails = [](const std::vector<unsigned char>& bytes, const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH(et::io::parse_safetensors(bytes, "f.safetensors"),
                      Catch::Contains("f.safetensors") && Catch::Contains(message));
  };
  fails(std::vector<unsigned char>(good.begin(), good.begin() + 5), "shorter than its 8-byte header length");
  fails(std::vector<unsigned char>(good.begin(), good.end() - 1), "past the 7 bytes of data");
  auto huge = good;
  huge[7] = 1;
  fails(huge, "a header of");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), "bad JSON");
  fails(with_header(R"([1])"), "does not start with '{'");
  fails(with_header(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})"), "unknown dtype \"F33\"");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"), "do not hold its shape's 3");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})"), "do not hold");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"), "non-negative integer");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[2]}})"), "needs exactly");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"),
        "overlap or leave a gap");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
        "appears twice");
  fails(with_header(R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"), "is not a string");
  fails(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)"), "text after the JSON value");
  // Escapes in names survive a round trip; the JSON reader decodes \u escapes to UTF-8.
  et::io::SafeTensorsFile odd;
  odd.tensors["a \"quoted\"\\name\n"] = {"F32", {1}, le_floats({3})};
  CHECK(et::io::parse_safetensors(et::io::serialize_safetensors(odd), "odd").tensors.count("a \"quoted\"\\name\n") == 1);
  CHECK(et::io::parse_json(R"("\u00e9\ud83d\ude00")", "json").string == "\xc3\xa9\xf0\x9f\x98\x80");
  const std::string path = temporary_path("bad.safetensors");
  write_bytes(path, with_header("{}"));
  CHECK_THROWS_WITH(et::io::read_safetensors(path), Catch::Contains("cover 0 of the 8 data bytes"));
  std::remove(path.c_str());
}
