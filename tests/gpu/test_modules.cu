// Modules and the data loader on the GPU: the cases of tests/common/module_cases.hpp and
// loader_cases.hpp on CUDA (the same initialization, dropout masks and shuffles as the
// CPU's are part of them), save/load of a module that lives on the GPU, and batches used
// on a stream of the user's.
#include "../common/init_cases.hpp"
#include "../common/loader_cases.hpp"
#include "../common/module_cases.hpp"
#include "../common/lstm_cases.hpp"
#include "../common/table7_cases.hpp"

#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: modules: Linear against a double-precision reference", "[nn][modules]") { test::check_linear<Gpu>(); }
TEST_CASE("GPU: modules: members, parameters, to, train/eval, Sequential", "[nn][modules]") {
  test::check_module_semantics<Gpu>();
}
TEST_CASE("GPU: modules: Dropout drops the CPU's elements", "[nn][modules]") { test::check_dropout<Gpu>(); }
TEST_CASE("GPU: modules: Embedding (the CPU's initial values)", "[nn][modules]") { test::check_embedding<Gpu>(); }
TEST_CASE("GPU: modules: LSTM against a double-precision reference", "[nn][lstm]") {
  test::check_lstm_against_reference<Gpu>();
}
TEST_CASE("GPU: modules: LSTM parameters, state, bad input", "[nn][lstm]") { test::check_lstm_module<Gpu>(); }
TEST_CASE("GPU: modules: LSTM gradients against central differences", "[nn][lstm]") { test::check_lstm_gradients<Gpu>(); }
TEST_CASE("GPU: modules: AdaptiveAvgPool2d", "[nn][modules]") { test::check_adaptive_avg_pool<Gpu>(); }
TEST_CASE("GPU: modules: ModuleList", "[nn][modules]") { test::check_module_list<Gpu>(); }
TEST_CASE("GPU: Table 7 networks: FCN-R, AlexNet-R, ResNet-56", "[nn][table7]") {
  test::check_table7_small_networks<Gpu>();
}
TEST_CASE("GPU: Table 7 networks: AlexNet-S, ResNet-50", "[nn][table7]") { test::check_table7_imagenet_networks<Gpu>(); }
TEST_CASE("GPU: modules: BatchNorm2d", "[nn][modules]") { test::check_batch_norm<Gpu>(); }
TEST_CASE("GPU: modules: Conv2d, pooling, Flatten", "[nn][modules]") { test::check_conv_pool_flatten<Gpu>(); }
TEST_CASE("GPU: nn::init: Xavier and Kaiming fills (the CPU's values), gains, fans", "[nn][init]") { test::check_init<Gpu>(); }
TEST_CASE("GPU: modules: a model built on the CPU, moved with to(), trains", "[nn][modules]") {
  test::check_module_training<Gpu>();
}

TEST_CASE("GPU: save a GPU module, load it into a CPU one and back", "[nn][safetensors]") {
  const std::string path = (std::filesystem::temp_directory_path() / "et_gpu_modules.safetensors").string();
  test::TinyMlp<float, Gpu> gpu_model(et::cuda<0>, 4);
  et::nn::save(gpu_model, path);
  test::TinyMlp<float, et::Cpu> cpu_model(et::cpu, 5);
  et::nn::load(cpu_model, path);
  CHECK(cpu_model.fc2.weight.to_vector() == gpu_model.fc2.weight.to_vector());
  cpu_model.fc1.bias.detach() += 1.0f;
  et::nn::save(cpu_model, path);
  et::nn::load(gpu_model, path);
  CHECK(gpu_model.fc1.bias.to_vector() == cpu_model.fc1.bias.to_vector());
  std::remove(path.c_str());
}

TEST_CASE("GPU: data loader: batches, seeded shuffles (the CPU's order), progress, function datasets", "[data]") {
  test::check_loader<Gpu>();
}

TEST_CASE("GPU: data loader: a batch is ready for the stream that is current when it is handed out", "[data]") {
  const std::int64_t n = 1 << 14;
  const auto x = et::randn<float>(et::cpu, {n, 64}, 1);
  const auto expected = et::sum(x, 1).to_vector();
  const et::data::TensorDataset dataset(x);
  et::data::DataLoader loader(dataset, et::cuda<0>, {.batch_size = 4096});
  const auto compute = et::Stream<Gpu>::create();
  std::vector<float> sums;
  et::StreamGuard on(compute);  // the batches are used on a stream of the user's
  for (const auto& [batch] : loader) {
    const auto row_sums = et::sum(et::sin(batch) * 0.0f + batch, 1).to_vector();
    sums.insert(sums.end(), row_sums.begin(), row_sums.end());
  }
  REQUIRE(sums.size() == expected.size());
  for (std::size_t i = 0; i < sums.size(); ++i) CHECK(std::abs(sums[i] - expected[i]) <= 1e-4f * (1 + std::abs(expected[i])));
}
