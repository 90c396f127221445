// et::DeviceSet on GPUs and et::nn::DataParallel (et/dist.hpp: NCCL), in one process that
// sees every GPU: scripts/gpu-check runs this on all the GPUs of the machine, and the
// [multi-gpu] cases only where it has two. DataParallel runs on every GPU seen
// (with_visible_devices), so on one GPU it is a set of one, and on two it splits every batch.
#include "../common/device_set_cases.hpp"

#include <et/dist.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using et::Cuda;

template <class T, class D>
struct Net : et::nn::Module<Net<T, D>> {
  et::nn::Linear<T, D> fc1, fc2;
  Net() = default;
  Net(D dev, std::uint64_t seed) : fc1(dev, 6, 5, seed), fc2(dev, 5, 3, seed + 1) {}
  auto members() { return et::nn::members("fc1", fc1, "fc2", fc2); }
  et::Tensor<T, 2, D> forward(const et::Tensor<T, 2, D>& x) { return fc2(et::eval(et::sigmoid(fc1(x)))); }
};

template <class T, class A, class B>
void check_same_parameters(const A& got, const B& want, double tolerance) {
  const auto g = got.parameters();
  const auto w = want.parameters();
  REQUIRE(g.size() == w.size());
  for (std::size_t k = 0; k != g.size(); ++k) {
    const auto a = g[k].data().to_vector(), b = w[k].data().to_vector();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i != a.size(); ++i) {
      CAPTURE(k, i);
      CHECK(double(a[i]) == Approx(double(b[i])).epsilon(tolerance).margin(tolerance));
    }
  }
}

/// Three steps of SGD with momentum, a step over two backwards (one with a penalty on a
/// parameter outside dp), each through dp and on the whole batch on one GPU: the same
/// parameters, and the same gradient for the input.
template <class T, class Set>
void check_training(Set set, bool replicated_optimizer, double bucket_mb, double tolerance) {
  using Model = Net<T, Cuda<0>>;
  auto x = et::randn<T>(et::cuda<0>, {13, 6}, 21);  // 13 rows: an uneven split
  const auto y = et::randn<T>(et::cuda<0>, {13, 3}, 22);
  Model model(et::cuda<0>, 100), reference(et::cuda<0>, 100);
  et::nn::DataParallel dp(model, set, {.bucket_mb = bucket_mb});
  CHECK(dp.buckets().size() == (bucket_mb > 1 ? 1u : 4u));
  const et::optim::SGDOptions options{.lr = 0.2, .momentum = 0.9};
  et::optim::SGD reference_opt(reference.parameters(), options);
  auto train = [&](auto& opt) {
    for (int step = 0; step < 3; ++step) {
      auto xr = x.detach().requires_grad_(true), xd = x.detach().requires_grad_(true);
      opt.zero_grad(true);
      et::nn::mse_loss(dp(xd), y).backward();
      opt.step();
      reference_opt.zero_grad(true);
      et::nn::mse_loss(reference(xr), y).backward();
      reference_opt.step();
      const auto gd = xd.grad().to_vector(), gr = xr.grad().to_vector();
      for (std::size_t i = 0; i != gd.size(); ++i) CHECK(double(gd[i]) == Approx(double(gr[i])).margin(tolerance));
    }
    check_same_parameters<T>(model, reference, tolerance);
    // Accumulation over two backwards, the second with a penalty on fc1's weight.
    opt.zero_grad(true);
    reference_opt.zero_grad(true);
    for (Model* m : {&model, &reference}) {
      auto forward = [&](const auto& rows) { return m == &model ? dp(rows) : reference(rows); };
      et::nn::mse_loss(forward(x.slice(0, 0, 6)), y.slice(0, 0, 6)).backward();
      const auto penalty = et::sum(m->fc1.weight * m->fc1.weight);
      et::eval(et::nn::mse_loss(forward(x.slice(0, 6, 13)), y.slice(0, 6, 13)) + 0.1 * penalty).backward();
    }
    opt.step();
    reference_opt.step();
    check_same_parameters<T>(model, reference, tolerance);
  };
  if (replicated_optimizer) {
    auto opt = dp.template optimizer<et::optim::SGD>(options);
    train(opt);
  } else {
    et::optim::SGD opt(dp.parameters(), options);  // the replicas follow at the next forward
    train(opt);
    et::NoGradGuard no_grad;
    (void)dp(x);
  }
  check_same_parameters<T>(dp.template replica<Set::size() - 1>(), model, 0.0);
}

}  // namespace

TEST_CASE("DeviceSet on a GPU, and a GPU with the host", "[device-set]") {
  test::check_device_set_copies<et::DeviceSet<Cuda<0>>>();
  test::check_device_set_copies<et::DeviceSet<Cuda<0>, et::Cpu>>();
  test::check_device_set_copies<et::DeviceSet<et::Pinned, Cuda<0>>>();
  test::check_device_set_errors<et::DeviceSet<Cuda<0>, et::Cpu>>();
  test::check_device_set_gradients<et::DeviceSet<Cuda<0>>>();
  test::check_device_set_gradients<et::DeviceSet<Cuda<0>, et::Pinned>>();
}

TEST_CASE("DeviceSet across two GPUs", "[device-set][multi-gpu]") {
  REQUIRE(et::device_count() >= 2);  // run only where gpu-check saw two GPUs
  test::check_device_set_copies<et::DeviceSet<Cuda<0>, Cuda<1>>>();
  test::check_device_set_copies<et::DeviceSet<Cuda<1>, et::Cpu, Cuda<0>>>();
  test::check_device_set_errors<et::DeviceSet<Cuda<1>, Cuda<0>>>();
  test::check_device_set_gradients<et::DeviceSet<Cuda<0>, Cuda<1>>>();
  test::check_device_set_gradients<et::DeviceSet<Cuda<1>, Cuda<0>>>();
}

TEST_CASE("DataParallel on every GPU seen trains as the whole batch on one GPU", "[data-parallel]") {
  et::with_visible_devices<2>([](auto set) {
    INFO("GPUs: " << set.size());
    for (const bool replicated : {true, false})
      for (const double bucket_mb : {25.0, 1e-5}) {
        CAPTURE(replicated, bucket_mb);
        check_training<double>(set, replicated, bucket_mb, 1e-10);
      }
    check_training<float>(set, true, 25.0, 2e-5);
  });
}

TEST_CASE("DataParallel: bad batches and a parameter left out are et::Errors", "[data-parallel][errors]") {
  et::with_visible_devices<2>([](auto set) {
    Net<double, Cuda<0>> model(et::cuda<0>, 7);
    et::nn::DataParallel dp(model, set);
    const auto x = et::ones<double>(et::cuda<0>, {4, 6});
    CHECK_THROWS_AS(dp(x.slice(0, 0, std::int64_t(set.size()) - 1)), et::ShapeError);
    CHECK_THROWS_WITH(dp(x.slice(0, 0, 0)), Catch::Contains("cannot be split among"));
    et::sum(model.fc1.weight * 2.0).backward();  // fc1.bias, fc2 get no gradient: their buckets wait
    CHECK_THROWS_WITH(dp(x), Catch::Contains("no gradient to parameter(s)") && Catch::Contains("1, 2, 3"));
    CHECK(dp(x).shape() == et::Shape<2>{4, 3});  // the error reset the buckets
    et::NoGradGuard no_grad;
    model.eval();
    const auto want = model(x).to_vector(), got = dp(x).to_vector();
    for (std::size_t i = 0; i != want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
  });
}
