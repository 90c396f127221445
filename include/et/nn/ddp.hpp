// DistributedDataParallel: one replica of a module per process (one GPU each, et::dist),
// each training on its own part of the batch, their gradients averaged over the processes
// during the backward, so that every replica takes the same optimizer step.
//
//   auto pg = et::dist::init();
//   Model<et::Cuda<0>> model(...);
//   et::nn::DistributedDataParallel ddp(model, pg, {.bucket_mb = 25});  // rank 0's parameters everywhere
//   et::optim::SGD opt(ddp.parameters(), {.lr = 0.01});
//   for (...) { opt.zero_grad(true); loss = f(ddp(x_of_this_rank)); loss.backward(); opt.step(); }
//
// The parameters are grouped into buckets of about bucket_mb megabytes, in the reverse of
// their order in parameters() (the order in which a backward usually completes them). When
// the backward has completed every gradient of a bucket (a leaf's gradient hook,
// autograd/graph.hpp), the bucket's all-reduces (average) go to NCCL as one group on a
// communication stream, while the backward goes on with the earlier layers; after the last
// bucket, the current stream waits for them, so step() reads averaged gradients. Inside
// `auto guard = ddp.no_sync();` backwards only accumulate (gradient accumulation); the first
// backward after it averages what was accumulated.
//
// Every parameter must get a gradient in every backward (PyTorch's default): the next
// forward throws et::Error naming those that did not. Not combined with an optimizer's
// overlap_with_backward() (its updates would read the gradients before they are averaged).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "et/dist/collectives.hpp"
#include "et/nn/buckets.hpp"
#include "et/nn/module.hpp"
#include "et/optim/parameter.hpp"
#include "et/runtime/stream.hpp"

namespace et::nn {

struct DdpOptions {
  /// About how many megabytes of gradients each all-reduce launch takes.
  double bucket_mb = 25;
  /// The all-reduces run on a stream of the GPU's highest priority, so that their blocks
  /// start ahead of the backward's queued ones (false: normal priority, as PyTorch's DDP).
  bool high_priority_comm = true;
};

namespace detail {

/// The optimizer parameter, element and device types of a module's parameters().
template <class M>
struct ParameterTypes {
  using Param = typename decltype(std::declval<const M&>().parameters())::value_type;
  using T = typename std::remove_cvref_t<decltype(std::declval<Param>().data())>::value_type;
  using D = typename std::remove_cvref_t<decltype(std::declval<Param>().data())>::device_type;
};

/// What a replicating wrapper does first: every rank takes rank 0's parameters, then each
/// parameter's completed gradient calls `state->gradient_ready(k)` (the state owns the
/// hooks, so it is alive while one runs).
template <class State>
void replicate_from_rank0(const std::shared_ptr<State>& state, const dist::ProcessGroup& pg) {
  for (const auto& p : state->params) {
    auto values = p.data();
    dist::broadcast(values, 0, pg);
    p.note_write();
  }
  State* s = state.get();
  for (std::size_t k = 0; k != s->params.size(); ++k)
    s->params[k].add_grad_hook({state, [s, k] { s->gradient_ready(k); }});
}

/// The communication stream of a replicating wrapper: each bucket's work runs on it after
/// what the device's current stream queued so far (the gradients it reads); after the
/// backward's last bucket the current stream waits for it, so step() reads the result.
template <class D>
struct CommStream {
  explicit CommStream(bool high_priority)
      : stream(Stream<D>::create(high_priority ? StreamPriority::high : StreamPriority::normal)) {}

  Stream<D> stream;
  Event<D> ready, done;

  /// Runs `queue()` with `stream` current, ordered after the current stream's work, and
  /// counts the bucket; after the backward's last one, the current stream waits for
  /// everything queued on `stream`. Returns whether that was the last.
  template <class Queue>
  bool run(Queue&& queue, GradientBuckets& buckets) {
    ready.record(current_stream(D{}));
    stream.wait(ready);
    {
      StreamGuard<D> guard(stream);
      queue();
    }
    if (!buckets.launched_last()) return false;
    done.record(stream);
    current_stream(D{}).wait(done);
    return true;
  }
};

}  // namespace detail

template <class M>
class DistributedDataParallel {
  using Param = typename detail::ParameterTypes<M>::Param;
  using T = typename detail::ParameterTypes<M>::T;
  using D = typename detail::ParameterTypes<M>::D;
  static_assert(D::is_cuda, "et: DistributedDataParallel replicates a module on CUDA devices (one per process)");

 public:
  /// Wraps `module` (kept by reference: it must outlive this object): broadcasts rank 0's
  /// parameters to every rank, then averages the gradients of every backward.
  DistributedDataParallel(M& module, const dist::ProcessGroup& pg, DdpOptions options = {})
      : module_(&module), state_(std::make_shared<State>(pg, module.parameters(), options)) {
    detail::replicate_from_rank0(state_, pg);
  }

  /// The wrapped module's forward, after checking the last backward reduced everything.
  template <class... X>
  decltype(auto) operator()(const X&... x) {
    state_->buckets.check_finished();
    return (*module_)(x...);
  }

  auto parameters() const { return module_->parameters(); }
  M& module() noexcept { return *module_; }
  const dist::ProcessGroup& process_group() const noexcept { return state_->pg; }
  /// The buckets, as parameter indices (for tests and tuning).
  std::vector<std::vector<std::size_t>> buckets() const { return state_->buckets.members(); }

 private:
  struct State;

 public:
  /// While the guard lives, backward() only accumulates the gradients locally.
  class NoSync {
   public:
    explicit NoSync(std::shared_ptr<State> state) : state_(std::move(state)) { state_->sync = false; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    ~NoSync() { state_->sync = true; }

   private:
    std::shared_ptr<State> state_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(state_); }

 private:
  struct State {
    State(const dist::ProcessGroup& group, std::vector<Param> list, const DdpOptions& options)
        : pg(group),
          params(std::move(list)),
          buckets(detail::parameter_bytes(params), options.bucket_mb * 1024 * 1024, 1, "DistributedDataParallel"),
          comm(options.high_priority_comm) {}

    dist::ProcessGroup pg;
    std::vector<Param> params;
    detail::GradientBuckets buckets;
    bool sync = true;
    detail::CommStream<D> comm;

    void gradient_ready(std::size_t k) {
      if (!sync) return;
      if (const auto b = buckets.complete(0, k)) launch(buckets.members()[*b]);
    }

    /// The bucket's gradients, complete on the current stream, averaged on `comm`.
    void launch(const std::vector<std::size_t>& members) {
      if (pg.size() == 1) {  // the average over one rank is the gradient: nothing to send or wait for
        buckets.launched_last();
        return;
      }
      comm.run([&] {
        std::vector<Tensor<T, 1, D>> grads;
        for (const std::size_t m : members) grads.push_back(params[m].grad());
        for (const auto& g : grads) et::detail::note_stream_uses(g);  // not reused before the all-reduce ends
        dist::detail::run_collective("a DistributedDataParallel bucket", pg, [&](ncclComm_t c, cudaStream_t s) {
          ET_NCCL_CHECK(ncclGroupStart());
          for (const auto& g : grads)
            ET_NCCL_CHECK(ncclAllReduce(g.data(), g.data(), std::size_t(g.numel()), dist::detail::nccl_type<T>(),
                                        ncclAvg, c, s));
          ET_NCCL_CHECK(ncclGroupEnd());
        });
      }, buckets);
    }
  };

  M* module_;
  std::shared_ptr<State> state_;
};

}  // namespace et::nn
