// Collectives over a process group (et/dist.hpp), one GPU per process, for any number of
// ranks: scripts/gpu-check runs this under `mpirun -np <GPUs>` (MPI bootstrap) and alone
// with torchrun's variables for one rank (TCP bootstrap's single-process path). Every
// rank checks every collective against a host reference of what all ranks passed, and
// DistributedDataParallel against training on the whole batch in one process. The
// [multi-rank] cases need two ranks or more; where there are fewer, gpu-check leaves them
// out and reports them as skipped.
#include <et/dist.hpp>
#include <et/nn.hpp>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;
et::dist::ProcessGroup* group = nullptr;

/// Rank r's value at element i (exact in every type tested).
double value(int r, std::int64_t i) { return double((r + 1) * 3 + (i % 7)) - 4.0; }

template <class T>
et::Tensor<T, 2, Gpu> filled(int r, std::int64_t rows, std::int64_t cols) {
  std::vector<T> v;
  for (std::int64_t i = 0; i < rows * cols; ++i) v.push_back(T(value(r, i)));
  return et::from_vector(et::cuda<0>, v, {rows, cols});
}

template <class T>
void check_all_reduce() {
  const auto& pg = *group;
  const int n = pg.size();
  for (const auto op : {et::dist::ReduceOp::sum, et::dist::ReduceOp::avg, et::dist::ReduceOp::max,
                        et::dist::ReduceOp::min, et::dist::ReduceOp::prod}) {
    if (op == et::dist::ReduceOp::avg && std::is_integral_v<T>) continue;  // NCCL averages floating types
    for (const std::int64_t rows : {0, 1, 33}) {
      auto t = filled<T>(pg.rank(), rows, 5);
      et::dist::all_reduce(t, pg, op);
      const auto got = t.to_vector();
      for (std::int64_t i = 0; i < rows * 5; ++i) {
        double want = value(0, i);
        for (int r = 1; r < n; ++r) {
          const double x = value(r, i);
          if (op == et::dist::ReduceOp::max) want = std::max(want, x);
          else if (op == et::dist::ReduceOp::min) want = std::min(want, x);
          else if (op == et::dist::ReduceOp::prod) want *= x;
          else want += x;
        }
        if (op == et::dist::ReduceOp::avg) want /= n;
        CAPTURE(int(op), rows, i);
        CHECK(double(got[std::size_t(i)]) == Approx(want).epsilon(std::is_same_v<T, et::half> ? 1e-3 : 1e-12));
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("all_reduce: sum, avg, max, min and prod over every rank", "[dist]", double, float, et::half,
                   std::int64_t) {
  check_all_reduce<TestType>();
}

TEST_CASE("broadcast, all_gather, reduce_scatter and barrier", "[dist]") {
  const auto& pg = *group;
  const int n = pg.size(), me = pg.rank();
  auto t = filled<float>(me, 4, 3);
  et::dist::broadcast(t, n - 1, pg);
  CHECK(t.to_vector() == filled<float>(n - 1, 4, 3).to_vector());

  const auto mine = filled<double>(me, 2, 3);
  auto gathered = et::zeros<double>(et::cuda<0>, {2 * n, 3});
  et::dist::all_gather(gathered, mine, pg);
  const auto all = gathered.to_vector();
  for (int r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < 6; ++i) CHECK(all[std::size_t(r * 6 + i)] == value(r, i));

  const auto whole = filled<double>(me, 3 * n, 2);  // this rank's part: rows 3 me .. 3 me + 2
  auto part = et::zeros<double>(et::cuda<0>, {3, 2});
  et::dist::reduce_scatter(part, whole, pg);
  const auto got = part.to_vector();
  for (std::int64_t i = 0; i < 6; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += value(r, me * 6 + i);
    CHECK(got[std::size_t(i)] == want);
  }
  et::dist::barrier(pg);

  // Bad input, on this rank alone: nothing reaches NCCL.
  auto strided = et::zeros<float>(et::cuda<0>, {4, 4}).transpose(0, 1);
  CHECK_THROWS_WITH(et::dist::all_reduce(strided, pg), Catch::Contains("must be contiguous"));
  CHECK_THROWS_WITH(et::dist::broadcast(t, n, pg), Catch::Contains("is not a rank"));
  auto wrong = et::zeros<double>(et::cuda<0>, {2 * n + 1, 3});
  CHECK_THROWS_WITH(et::dist::all_gather(wrong, mine, pg), Catch::Contains("need [" + std::to_string(2 * n)));
}

TEST_CASE("ranks that pass different shapes all get et::ShapeError", "[dist][multi-rank]") {
  const auto& pg = *group;
  auto t = et::zeros<float>(et::cuda<0>, {3, pg.rank() == pg.size() - 1 ? 5 : 4});
  CHECK_THROWS_AS(et::dist::all_reduce(t, pg), et::ShapeError);
  auto u = et::zeros<float>(et::cuda<0>, {3, 4});
  et::dist::all_reduce(u, pg);  // the group is still good
  CHECK(u.to_vector() == std::vector<float>(12, 0.0f));
}

TEST_CASE("a collective that one rank never joins aborts after the timeout", "[dist][multi-rank]") {
  {
    et::dist::ProcessGroup pg = et::dist::init({.timeout = std::chrono::seconds(3), .check_shapes = false,
                                                .select_device = false});
    if (pg.rank() == 0) {
      auto t = et::ones<float>(et::cuda<0>, {1024});
      et::dist::all_reduce(t, pg);  // the others do not come
      et::synchronize(et::cuda<0>);  // returns: the abort ends the kernel
      CHECK_THROWS_WITH(pg.native(), Catch::Contains("did not complete within 3000 ms"));
      CHECK_THROWS_WITH(et::dist::all_reduce(t, pg), Catch::Contains("aborted"));
    }
    // The ranks meet again on the good group, every one still holding pg: one that left it
    // while rank 0 waits would end the job (the next cases).
    group->exchange("");
  }
  group->exchange("");
}

// The job ends together. Each case below ends the job on purpose, so each is hidden and run
// alone by scripts/gpu-check, which checks that mpirun ends within seconds, failing, with a
// message that names the rank.
TEST_CASE("a rank killed in the middle of collectives ends the job", "[.peer-death][multi-rank]") {
  const auto& pg = *group;
  REQUIRE(pg.size() >= 2);
  auto t = et::ones<float>(et::cuda<0>, {1 << 20});
  for (int step = 0;; ++step) {
    if (pg.rank() == 1 && step == 20) std::raise(SIGKILL);  // no goodbye, no exit handlers
    et::dist::all_reduce(t, pg);
    et::synchronize(et::cuda<0>);
  }
}

TEST_CASE("a rank that leaves while the others wait for it ends the job", "[.peer-leave][multi-rank]") {
  const auto& pg = *group;
  REQUIRE(pg.size() >= 2);
  auto t = et::ones<float>(et::cuda<0>, {1 << 20});
  if (pg.rank() == 1) std::exit(3);  // its group says goodbye at exit; the others wait in vain
  for (;;) {
    et::dist::all_reduce(t, pg);
    et::synchronize(et::cuda<0>);
  }
}

namespace {

/// A small model; `seed` picks its initial parameters.
template <class T>
auto model_of(std::uint64_t seed) {
  using Linear = et::nn::Linear<T, Gpu>;
  return et::nn::Sequential(Linear(et::cuda<0>, 6, 5, seed), et::nn::Sigmoid{}, Linear(et::cuda<0>, 5, 3, seed + 1));
}

/// Double: to 1e-10; float: to 1e-5 (the ranks sum their parts in another order than one
/// GPU sums the whole batch).
template <class A, class B>
void check_same_parameters(const A& got, const B& want) {
  const auto g = got.parameters();
  const auto w = want.parameters();
  REQUIRE(g.size() == w.size());
  for (std::size_t k = 0; k != g.size(); ++k) {
    const auto a = g[k].data().to_vector(), b = w[k].data().to_vector();
    const double tolerance = std::is_same_v<typename decltype(a)::value_type, double> ? 1e-10 : 1e-5;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i != a.size(); ++i)
      CHECK(a[i] == Approx(b[i]).epsilon(tolerance).margin(tolerance / 100));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("DistributedDataParallel: each rank's part of the batch trains as the whole batch on one GPU",
                   "[dist]", double, float) {
  using T = TestType;
  const auto& pg = *group;
  const int n = pg.size(), me = pg.rank();
  const auto x = et::randn<T>(et::cuda<0>, {8 * n, 6}, 21);  // the whole batch: the same on every rank
  const auto y = et::randn<T>(et::cuda<0>, {8 * n, 3}, 22);
  auto rows = [&](const auto& t, std::int64_t part, std::int64_t per_rank) {  // this rank's rows of a part
    const std::int64_t begin = part * per_rank * n + me * per_rank;
    return t.slice(0, begin, begin + per_rank);
  };
  for (const double bucket_mb : {25.0, 1e-5}) {
    CAPTURE(bucket_mb);
    auto model = model_of<T>(100 + std::uint64_t(me));  // differs between ranks until DDP broadcasts rank 0's
    et::nn::DistributedDataParallel ddp(model, pg, {.bucket_mb = bucket_mb});
    CHECK(ddp.buckets().size() == (bucket_mb > 1 ? 1u : 4u));
    CHECK(ddp.buckets().front().front() == 3);  // the last parameter's gradient comes first
    auto reference = model_of<T>(100);  // rank 0's initial parameters, trained on the whole batch
    check_same_parameters(model, reference);
    et::optim::SGD opt(ddp.parameters(), {.lr = 0.2}), reference_opt(reference.parameters(), {.lr = 0.2});
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad(true);
      et::nn::mse_loss(ddp(rows(x, 0, 8)), rows(y, 0, 8)).backward();
      opt.step();
      reference_opt.zero_grad(true);
      et::nn::mse_loss(reference(x), y).backward();
      reference_opt.step();
    }
    check_same_parameters(model, reference);

    // Gradient accumulation: two micro-batches, the first under no_sync().
    opt.zero_grad(true);
    {
      auto guard = ddp.no_sync();
      et::nn::mse_loss(ddp(rows(x, 0, 4)), rows(y, 0, 4)).backward();
    }
    et::nn::mse_loss(ddp(rows(x, 1, 4)), rows(y, 1, 4)).backward();
    opt.step();
    reference_opt.zero_grad(true);
    et::nn::mse_loss(reference(x.slice(0, 0, 4 * n)), y.slice(0, 0, 4 * n)).backward();
    et::nn::mse_loss(reference(x.slice(0, 4 * n, 8 * n)), y.slice(0, 4 * n, 8 * n)).backward();
    reference_opt.step();
    check_same_parameters(model, reference);
  }
}

TEST_CASE("ShardedDataParallel: Adam on 1/N of the state trains as the whole batch on one GPU", "[dist]") {
  using T = double;
  const auto& pg = *group;
  const int n = pg.size(), me = pg.rank();
  const auto x = et::randn<T>(et::cuda<0>, {8 * n, 6}, 31);
  const auto y = et::randn<T>(et::cuda<0>, {8 * n, 3}, 32);
  const auto mine = [&](const auto& t) { return t.slice(0, 8 * me, 8 * me + 8); };
  for (const double bucket_mb : {25.0, 1e-5}) {
    CAPTURE(bucket_mb);
    auto model = model_of<T>(200 + std::uint64_t(me));  // differs until the wrapper broadcasts rank 0's
    et::nn::ShardedDataParallel sdp(model, pg, {.bucket_mb = bucket_mb});
    auto reference = model_of<T>(200);
    std::int64_t total = 0;
    for (const auto& p : reference.parameters()) total += p.numel();
    // The shards cover every element once: their sizes add up to the parameters' over the ranks.
    std::int64_t covered = 0;
    for (const auto& part : pg.exchange(std::to_string(sdp.shard_numel()))) covered += std::stoll(part);
    CHECK(covered == total);
    CHECK(sdp.shard_numel() <= total / n + (bucket_mb > 1 ? 1 : 4));
    et::optim::Adam opt(sdp.parameters(), {.lr = 0.05}), reference_opt(reference.parameters(), {.lr = 0.05});
    std::size_t sharded_state = 0, whole_state = 0;
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad(true);
      et::nn::mse_loss(sdp(mine(x)), mine(y)).backward();
      et::synchronize(et::cuda<0>);
      const std::size_t before = et::memory_stats(et::cuda<0>).allocated;
      opt.step();
      et::synchronize(et::cuda<0>);
      if (step == 0) sharded_state = et::memory_stats(et::cuda<0>).allocated - before;  // Adam's m and v
      reference_opt.zero_grad(true);
      et::nn::mse_loss(reference(x), y).backward();
      et::synchronize(et::cuda<0>);
      const std::size_t reference_before = et::memory_stats(et::cuda<0>).allocated;
      reference_opt.step();
      et::synchronize(et::cuda<0>);
      if (step == 0) whole_state = et::memory_stats(et::cuda<0>).allocated - reference_before;
    }
    (void)sdp(mine(x));  // gathers the last step's pieces
    check_same_parameters(model, reference);
    CAPTURE(sharded_state, whole_state);
    CHECK(sharded_state >= 2 * sizeof(T) * std::size_t(sdp.shard_numel()));
    CHECK(sharded_state * std::size_t(n) <= whole_state + std::size_t(n) * 8 * 512);  // 1/N, up to the pool's rounding
  }
}

TEST_CASE("DistributedDataParallel: a parameter left out of a backward is named at the next forward", "[dist]") {
  et::nn::Linear<double, Gpu> model(et::cuda<0>, 4, 2, 5);
  et::nn::DistributedDataParallel ddp(model, *group);
  const auto x = et::ones<double>(et::cuda<0>, {3, 4});
  et::sum(model.weight * 2.0).backward();  // the bias gets no gradient: its bucket waits
  CHECK_THROWS_WITH(ddp(x), Catch::Contains("no gradient to parameter(s) 1"));
  CHECK(ddp(x).shape() == et::Shape<2>{3, 2});  // the error reset the buckets
}

int main(int argc, char** argv) {
  std::optional<et::dist::ProcessGroup> pg;
  try {
    pg.emplace(et::dist::init({.timeout = std::chrono::seconds(120)}));
  } catch (const et::CudaError& e) {  // CUDA cannot start: no GPU here
    std::printf("SKIPPED: the et::dist tests need a GPU per process (%s)\n", e.what());
    return 77;
  }
  group = &*pg;
  std::printf("rank %d of %d (%s bootstrap), GPU: %s\n", pg->rank(), pg->size(), pg->bootstrap_kind(),
              et::device_properties(0).name.c_str());
  const int failed = Catch::Session().run(argc, argv);
  group->exchange("");
  return failed == 0 ? 0 : 1;
}
