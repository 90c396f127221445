// ShardedDataParallel: DistributedDataParallel whose optimizer state is split among the
// ranks (ZeRO stage 1). Each rank keeps the whole model and runs its forward and backward
// on its part of the batch, as with DDP; but each rank updates only its shard (1/N) of the
// parameters, so an optimizer's state (Adam's two moments) takes 1/N of the memory on each
// GPU. LibTorch's C++ API has nothing like it (PyTorch's ZeroRedundancyOptimizer is Python).
//
//   et::nn::ShardedDataParallel sdp(model, pg);                  // rank 0's parameters everywhere
//   et::optim::Adam opt(sdp.parameters(), {.lr = 1e-3});         // this rank's shard only
//   for (...) { opt.zero_grad(true); loss = f(sdp(x_of_this_rank)); loss.backward(); opt.step(); }
//
// The parameters are laid end to end in one flat buffer, in buckets of about bucket_mb
// megabytes in the reverse of parameters() order (as DDP's); each bucket is padded to a
// multiple of N elements and split in N pieces, and rank r owns piece r of every bucket.
// When the backward has completed a bucket's gradients, they are copied into the buffer and
// reduce-scattered (average) on a communication stream while the backward goes on: rank r
// then holds the averaged gradient of its pieces. sdp.parameters() are those pieces, as 1-D
// views of the model's parameters with the reduced gradients as their grad(). After the
// optimizer's step, the next forward all-gathers the pieces into every rank's model (once
// after each backward: a step taken without a backward before it stays on its rank).
// Once copied into the buffer, the model's own gradients are dropped (the reduced gradient
// of this rank's shard is what its optimizer reads; gradients do not accumulate over
// backwards here). Every parameter must get a gradient in every backward (the next forward
// names those that did not). The buffer costs one copy of the parameters' size per GPU;
// the optimizer's state is 1/N of DDP's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "et/dist/collectives.hpp"
#include "et/nn/buckets.hpp"
#include "et/nn/ddp.hpp"
#include "et/nn/module.hpp"
#include "et/ops/creation.hpp"
#include "et/optim/parameter.hpp"
#include "et/runtime/stream.hpp"

namespace et::nn {

struct ShardedOptions {
  /// About how many megabytes of gradients each reduce-scatter takes.
  double bucket_mb = 25;
  /// The reduce-scatters run on a stream of the GPU's highest priority (DdpOptions').
  bool high_priority_comm = true;
};

namespace detail {

/// A piece of a parameter that this rank updates: its values are the parameter's, its
/// gradient a view of the reduced buffer.
template <class T, class D>
struct ShardSource final : optim::detail::Source<T, D> {
  ShardSource(optim::Parameter<T, D> whole, Tensor<T, 1, D> grad) : whole(std::move(whole)), reduced(std::move(grad)) {}
  Tensor<T, 1, D> grad() const override { return reduced; }
  void clear_grad() const override {}  // the next backward's reduce-scatter overwrites it
  void note_write() const override { whole.note_write(); }
  void add_grad_hook(et::detail::GradHook) const override {
    throw Error("et: ShardedDataParallel: a shard's gradient comes from its reduce-scatter; hooks go on the model's "
                "parameters");
  }
  void set_grad_fold(et::detail::GradFold) const override {
    throw Error("et: ShardedDataParallel: an optimizer that overlaps the backward cannot update a shard (its "
                "gradient is reduced after the backward)");
  }
  optim::Parameter<T, D> whole;
  Tensor<T, 1, D> reduced;
};

}  // namespace detail

template <class M>
class ShardedDataParallel {
  using Param = typename detail::ParameterTypes<M>::Param;
  using T = typename detail::ParameterTypes<M>::T;
  using D = typename detail::ParameterTypes<M>::D;
  static_assert(D::is_cuda, "et: ShardedDataParallel replicates a module on CUDA devices (one per process)");

 public:
  /// Wraps `module` (kept by reference: it must outlive this object): broadcasts rank 0's
  /// parameters to every rank and lays out the shards.
  ShardedDataParallel(M& module, const dist::ProcessGroup& pg, ShardedOptions options = {})
      : module_(&module), state_(std::make_shared<State>(pg, module.parameters(), options)) {
    detail::replicate_from_rank0(state_, pg);
  }

  /// The wrapped module's forward, after the updated shards were gathered into it.
  template <class... X>
  decltype(auto) operator()(const X&... x) {
    state_->buckets.check_finished();
    state_->gather();
    return (*module_)(x...);
  }

  /// This rank's shard of the parameters: what its optimizer updates.
  const std::vector<optim::Parameter<T, D>>& parameters() const noexcept { return state_->shard; }
  /// Elements of the parameters this rank updates (about 1/size() of them).
  std::int64_t shard_numel() const noexcept {
    std::int64_t n = 0;
    for (const auto& p : state_->shard) n += p.numel();
    return n;
  }
  M& module() noexcept { return *module_; }
  const dist::ProcessGroup& process_group() const noexcept { return state_->pg; }

 private:
  struct Range {
    std::size_t param;
    std::int64_t begin, end;  ///< of the parameter's elements
    std::int64_t at;          ///< where element `begin` sits in the flat buffer
  };

  struct State {
    State(const dist::ProcessGroup& group, std::vector<Param> list, const ShardedOptions& options)
        : pg(group),
          params(std::move(list)),
          buckets(detail::parameter_bytes(params), options.bucket_mb * 1024 * 1024, 1, "ShardedDataParallel"),
          comm(options.high_priority_comm) {
      const std::int64_t n = pg.size(), me = pg.rank();
      std::int64_t at = 0;
      offset.resize(params.size());
      for (const auto& members : buckets.members()) {
        std::int64_t size = 0;
        for (const std::size_t k : members) offset[k] = at + size, size += params[k].numel();
        const std::int64_t piece = (size + n - 1) / n;
        bucket_at.push_back(at);
        bucket_piece.push_back(piece);
        const std::int64_t lo = at + me * piece, hi = lo + piece;  // this rank's piece
        for (const std::size_t k : members) {
          const std::int64_t b = std::max(lo, offset[k]), e = std::min(hi, offset[k] + params[k].numel());
          if (b < e) mine.push_back({k, b - offset[k], e - offset[k], b});
        }
        at += piece * n;
      }
      flat = et::zeros<T>(D{}, {at});
      for (const Range& r : mine)
        shard.emplace_back(params[r.param].data().slice(0, r.begin, r.end),
                           std::make_shared<detail::ShardSource<T, D>>(params[r.param],
                                                                       flat.slice(0, r.at, r.at + r.end - r.begin)));
    }

    dist::ProcessGroup pg;
    std::vector<Param> params;
    detail::GradientBuckets buckets;
    std::vector<std::int64_t> offset, bucket_at, bucket_piece;
    std::vector<Range> mine;
    Tensor<T, 1, D> flat;
    std::vector<optim::Parameter<T, D>> shard;
    bool reduced = false;  ///< a backward reduced the gradients since the last gather
    detail::CommStream<D> comm;

    void gradient_ready(std::size_t k) {
      if (const auto b = buckets.complete(0, k)) reduce(*b);
    }

    /// Bucket b's gradients, complete on the current stream, copied into the buffer and
    /// reduce-scattered on `comm`: this rank's piece then holds their average.
    void reduce(std::size_t b) {
      const bool last = comm.run([&] {
        NoGradGuard no_grad;
        for (const std::size_t k : buckets.members()[b]) {
          const auto g = params[k].grad();
          flat.slice(0, offset[k], offset[k] + g.numel()).copy_(g);
          et::detail::note_stream_uses(g);  // its memory waits for the copy before reuse
          params[k].clear_grad();           // reduced: the next backward starts anew
        }
        const std::size_t piece = std::size_t(bucket_piece[b]);
        T* base = flat.data() + bucket_at[b];
        dist::detail::run_collective("a ShardedDataParallel bucket", pg, [&](ncclComm_t c, cudaStream_t s) {
          ET_NCCL_CHECK(ncclReduceScatter(base, base + piece * std::size_t(pg.rank()), piece,
                                          dist::detail::nccl_type<T>(), ncclAvg, c, s));
        });
      }, buckets);
      if (last) reduced = true;
    }

    /// Every rank's pieces into every rank's parameters, once after each backward (every
    /// rank decides alike: they run the same backwards), so the step between them counts.
    void gather() {
      if (!reduced) return;
      reduced = false;
      NoGradGuard no_grad;
      for (std::size_t j = 0; j != mine.size(); ++j)
        flat.slice(0, mine[j].at, mine[j].at + shard[j].numel()).copy_(shard[j].data());
      T* base = flat.data();
      dist::detail::run_collective("a ShardedDataParallel gather", pg, [&](ncclComm_t c, cudaStream_t s) {
        ET_NCCL_CHECK(ncclGroupStart());
        for (std::size_t b = 0; b != bucket_at.size(); ++b) {
          const std::size_t piece = std::size_t(bucket_piece[b]);
          T* bucket = base + bucket_at[b];
          ET_NCCL_CHECK(ncclAllGather(bucket + piece * std::size_t(pg.rank()), bucket, piece,
                                      dist::detail::nccl_type<T>(), c, s));
        }
        ET_NCCL_CHECK(ncclGroupEnd());
      });
      for (std::size_t k = 0; k != params.size(); ++k) {
        auto values = params[k].data();
        values.copy_(flat.slice(0, offset[k], offset[k] + values.numel()));
        params[k].note_write();
      }
    }
  };

  M* module_;
  std::shared_ptr<State> state_;
};

}  // namespace et::nn
