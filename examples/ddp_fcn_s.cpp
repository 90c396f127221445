// Trains FCN-S (examples/fcn_s.hpp) with DistributedDataParallel, one process per GPU:
// every rank takes its own synthetic mini-batch of 64, the gradients are averaged over the
// ranks during the backward, and every rank takes the same step. Rank 0 prints the loss;
// at the end every rank checks that its parameters are rank 0's. Then the same with Adam
// through ShardedDataParallel, each rank keeping the optimizer state of its shard only.
//
//   mpirun -np 2 ./ddp_fcn_s [divisor] [steps]    layer widths divided by divisor (default 1)
//
// Without a GPU it says so and exits with 77 (CTest's "skipped").
#include "fcn_s.hpp"

#include <et/dist.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) try {
  const std::int64_t divisor = argc > 1 ? std::atoll(argv[1]) : 1;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5;
  if (divisor < 1 || divisor > 2048 || steps < 2) {
    std::fprintf(stderr, "usage: ddp_fcn_s [divisor in 1..2048] [steps >= 2]\n");
    return 2;
  }
  // [guide:ddp]
  et::dist::ProcessGroup pg = et::dist::init();
  const fcn::Sizes sizes = fcn::scaled(divisor);
  auto model = fcn::make_model(et::cuda<0>, sizes, /*seed=*/1 + std::uint64_t(pg.rank()));
  et::nn::DistributedDataParallel ddp(model, pg);  // rank 0's parameters on every rank
  et::optim::SGD opt(ddp.parameters(), {.lr = 0.01});
  const auto batch = fcn::synthetic_batch(et::cuda<0>, sizes, 7 + std::uint64_t(pg.rank()));  // this rank's part
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad(true);
    auto loss = et::nn::cross_entropy(ddp(batch.x), batch.labels);
    loss.backward();  // the gradients are averaged over the ranks, bucket by bucket
    opt.step();
    if (pg.rank() == 0) std::printf("step %d: loss %.5f on rank 0 of %d\n", step, loss.item(), pg.size());
  }
  // [guide:end]
  // Every rank's parameters must be rank 0's: compare one sum per parameter.
  bool ok = true;
  for (const auto& p : ddp.parameters()) {
    const double mine = double(et::sum(p.data()).item());
    const auto all = pg.exchange(std::to_string(mine));
    for (const auto& other : all) ok = ok && other == all[0];
  }
  std::printf("rank %d of %d (%s): parameters %s rank 0's\n", pg.rank(), pg.size(), pg.bootstrap_kind(),
              ok ? "equal" : "DIFFER FROM");

  // The same training with Adam, its state split among the ranks (ZeRO stage 1).
  auto sharded_model = fcn::make_model(et::cuda<0>, sizes, /*seed=*/1 + std::uint64_t(pg.rank()));
  // [guide:zero]
  et::nn::ShardedDataParallel sdp(sharded_model, pg);    // rank 0's parameters on every rank
  et::optim::Adam adam(sdp.parameters(), {.lr = 1e-4});  // this rank's shard: 1/N of Adam's state
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad(true);
    auto loss = et::nn::cross_entropy(sdp(batch.x), batch.labels);
    loss.backward();  // each rank gets the averaged gradient of its shard
    adam.step();      // updates this rank's shard; the next forward gathers every rank's
    if (pg.rank() == 0) std::printf("sharded step %d: loss %.5f\n", step, loss.item());
  }
  // [guide:end]
  (void)sdp(batch.x);  // gathers the last step's shards
  for (const auto& p : sharded_model.parameters()) {
    const double mine = double(et::sum(p.data()).item());
    const auto all = pg.exchange(std::to_string(mine));
    for (const auto& other : all) ok = ok && other == all[0];
  }
  std::printf("rank %d: Adam state on %lld of the parameters' elements; sharded parameters %s rank 0's\n", pg.rank(),
              static_cast<long long>(sdp.shard_numel()), ok ? "equal" : "DIFFER FROM");
  return ok ? 0 : 1;
} catch (const et::CudaError& e) {
  std::printf("ddp_fcn_s needs a GPU (%s)\n", e.what());
  return 77;
}
