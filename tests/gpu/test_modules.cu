// Modules and the data loader on the GPU: the cases of tests/common/module_cases.hpp and
// loader_cases.hpp on CUDA (the same initialization, dropout masks and shuffles as the
// CPU's are part of them), save/load of a module that lives on the GPU, and batches used
// on a stream of the user's.
#include "../common/batch_norm_cases.hpp"
#include "../common/init_cases.hpp"
#include "../common/loader_cases.hpp"
#include "../common/module_cases.hpp"
#include "../common/lstm_cases.hpp"
#include "../common/table7_cases.hpp"
#include "cupti_counter.hpp"

#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: modules: Linear against a double-precision reference", "[nn][modules]") { test::check_linear<Gpu>(); }
TEST_CASE("GPU: modules: members, parameters, to, train/eval, Sequential", "[nn][modules]") {
  test::check_module_semantics<Gpu>();
}
TEST_CASE("GPU: modules: an empty batch gives zero gradients to conv, pooling and LSTM parameters",
          "[nn][modules]") {
  test::check_empty_batch_gradients<Gpu>();
}
TEST_CASE("GPU: modules: Dropout drops the CPU's elements", "[nn][modules]") { test::check_dropout<Gpu>(); }
TEST_CASE("GPU: modules: Embedding (the CPU's initial values)", "[nn][modules]") { test::check_embedding<Gpu>(); }
TEST_CASE("GPU: modules: LSTM against a double-precision reference", "[nn][lstm]") {
  test::check_lstm_against_reference<Gpu>();
}
TEST_CASE("GPU: modules: LSTM parameters, state, bad input", "[nn][lstm]") { test::check_lstm_module<Gpu>(); }
TEST_CASE("GPU: modules: LSTM gradients against central differences", "[nn][lstm]") { test::check_lstm_gradients<Gpu>(); }
TEST_CASE("GPU: modules: the LSTM is one cuDNN operation, captured in a graph like eager", "[nn][lstm][cupti]") {
  const std::int64_t S = 64, B = 4, H = 8;
  et::nn::LSTM<float, Gpu> lstm(et::cuda<0>, 5, H, {.num_layers = 2}, 7);
  const auto x = et::randn<float>(et::cuda<0>, {S, B, 5}, 1);
  // Composed, every step of each layer would run its own fused expressions (256 etensor
  // kernels forward); on cuDNN etensor's kernels are the weights' join (cat), the lengths'
  // fill, the loss and the gradients' accumulation, whatever the sequence's length.
  test::LaunchCounter counter;
  const auto [y, h, c] = lstm(x);
  et::sum(y * y).backward();
  const test::Launches seen = counter.stop();
  CAPTURE(seen.kernel_names);
  const auto ours = std::count_if(seen.kernel_names.begin(), seen.kernel_names.end(),
                                  [](const std::string& k) { return k.find("et7kernels") != std::string::npos; });
  CHECK(ours < S);
  CHECK(static_cast<std::int64_t>(seen.kernels()) > ours);  // cuDNN's own
  // The backward runs once per forward (cuDNN's reserve space): a second one is an error.
  const auto [y2, h2, c2] = lstm(x);
  auto loss = et::sum(y2 * y2);
  loss.backward(et::retain_graph);
  CHECK_THROWS_AS(loss.backward(), et::Error);
  // A training step captured as one graph gives eager's parameters.
  auto train = [&](bool captured) {
    et::nn::LSTM<float, Gpu> model(et::cuda<0>, 5, H, {.num_layers = 2}, 7);
    et::optim::SGD opt(model.parameters(), {.lr = 0.1});
    auto step = [&] {
      opt.zero_grad();
      const auto [out, hn, cn] = model(x);
      et::eval(et::sum(out * out) + et::sum(cn)).backward();
      et::nn::clip_grad_norm_(model.parameters(), 1.0);
      opt.step();
    };
    const auto s = et::Stream<Gpu>::create();
    et::StreamGuard guard(s);
    step();
    if (captured) {
      const auto graph = et::capture(s, step);
      for (int k = 0; k < 3; ++k) graph.replay();
    } else {
      for (int k = 0; k < 3; ++k) step();
    }
    return test::lstm_parameter_values(model);
  };
  const auto eager = train(false), replayed = train(true);
  REQUIRE(eager.size() == replayed.size());
  for (std::size_t k = 0; k < eager.size(); ++k) test::check_all_close(eager[k], replayed[k], 1e-5);
}

TEST_CASE("GPU: modules: a captured Embedding reads NaN at an index out of range (eager throws)", "[nn][graphs]") {
  et::nn::Embedding<float, Gpu> emb(et::cuda<0>, 4, 3, 1);
  const auto bad = et::from_vector(et::cuda<0>, std::vector<std::int64_t>{1, 7, -1}, {3});
  CHECK_THROWS_AS(emb(bad), et::Error);
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  et::Tensor<float, 2, Gpu> out;
  const auto graph = et::capture(s, [&] { out = emb(bad); });
  graph.replay();
  const auto values = out.to_vector(), table = emb.weight.to_vector();
  for (int j = 0; j < 3; ++j) {
    CHECK(values[j] == table[3 + j]);  // row 1
    CHECK(std::isnan(values[3 + j]));  // 7 and -1: outside [0, 4)
    CHECK(std::isnan(values[6 + j]));
  }
}
TEST_CASE("GPU: modules: AdaptiveAvgPool2d", "[nn][modules]") { test::check_adaptive_avg_pool<Gpu>(); }
TEST_CASE("GPU: modules: ModuleList", "[nn][modules]") { test::check_module_list<Gpu>(); }
TEST_CASE("GPU: Table 7 networks: FCN-R, AlexNet-R, ResNet-56", "[nn][table7]") {
  test::check_table7_small_networks<Gpu>();
}
TEST_CASE("GPU: Table 7 networks: AlexNet-S, ResNet-50", "[nn][table7]") { test::check_table7_imagenet_networks<Gpu>(); }
TEST_CASE("GPU: modules: BatchNorm2d", "[nn][modules]") { test::check_batch_norm<Gpu>(); }
TEST_CASE("GPU: batch_norm, with ReLU and a residual, in every type, against a reference", "[nn][batch_norm]") {
  test::check_batch_norm_forms<Gpu>(true);
}
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
