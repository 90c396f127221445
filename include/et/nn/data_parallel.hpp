// DataParallel: one process, a replica of a module on each GPU of a DeviceSet, each
// running the forward and backward of its rows of the batch, concurrently on its own
// device's streams; the gradients summed over the GPUs with NCCL during the backward.
//
//   Model<et::Cuda<0>> model(...);
//   et::nn::DataParallel dp(model, et::DeviceSet<et::Cuda<0>, et::Cuda<1>>{});
//   auto opt = dp.optimizer<et::optim::SGD>({.lr = 0.01});   // steps every replica alike
//   for (...) { opt.zero_grad(true); loss = f(dp(x), y); loss.backward(); opt.step(); }
//
// dp(x) splits x's rows among the devices (DeviceSet::scatter, balanced), runs replica I
// on piece I, and gathers the outputs on the first device (the module's own: replica 0).
// The backward reaches every replica through the gather. When a bucket of about bucket_mb
// megabytes of parameters (in the reverse of parameters() order) has its gradients complete
// on every replica, one grouped NCCL all-reduce sums them on a communication stream per
// device while the backward goes on; after the last bucket each device's current stream
// waits for it. Every replica then holds the gradient of the whole batch, in the module's
// own .grad() included. A gradient the module's parameters get outside dp (a penalty on
// them in the loss, say) or from an earlier backward (accumulation) counts once: the
// replicas' own gradients are cleared at each forward that records.
//
// The replicas stay identical in one of two ways. dp.optimizer<Opt>(options) gives one
// optimizer per replica, stepped together (the same update of the same summed gradient on
// every GPU, and nothing sent). An optimizer of the module's parameters alone
// (dp.parameters()) also works: at the next forward, every parameter that changed on
// replica 0 and not alike on the others is broadcast from it (a copy of the parameters per
// step). Buffers (BatchNorm's running statistics) are broadcast from replica 0 at every
// forward, and the replicas take the module's train()/eval() mode.
//
// Every parameter must get a gradient in every backward through dp (the next forward
// throws et::Error naming the others), and a batch needs at least one row per device.
#pragma once

#include <nccl.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "et/device_set.hpp"
#include "et/dist/collectives.hpp"
#include "et/nn/buckets.hpp"
#include "et/nn/module.hpp"
#include "et/optim/parameter.hpp"
#include "et/runtime/stream.hpp"

namespace et::nn {

struct DataParallelOptions {
  /// About how many megabytes of gradients each all-reduce launch takes.
  double bucket_mb = 25;
};

/// One optimizer per replica of a DataParallel, stepped together.
template <class... Opts>
class ReplicatedOptimizer {
 public:
  explicit ReplicatedOptimizer(Opts... replicas) : replicas_(std::move(replicas)...) {}
  void zero_grad(bool set_to_none = false) {
    std::apply([&](auto&... o) { (o.zero_grad(set_to_none), ...); }, replicas_);
  }
  void step() {
    std::apply([](auto&... o) { (o.step(), ...); }, replicas_);
  }
  /// Replica I's optimizer.
  template <std::size_t I>
  auto& replica() noexcept {
    return std::get<I>(replicas_);
  }

 private:
  std::tuple<Opts...> replicas_;
};

template <class M, class Set>
class DataParallel;

template <class M, Device D0, Device... Rest>
class DataParallel<M, DeviceSet<D0, Rest...>> {
  using Set = DeviceSet<D0, Rest...>;
  using T = typename detail::module_types<M>::value_type;
  static_assert(std::is_same_v<typename detail::module_types<M>::device_type, D0>,
                "et: DataParallel: the module must live on the set's first device (it is replica 0)");
  static_assert(D0::is_cuda && (Rest::is_cuda && ...), "et: DataParallel replicates a module on CUDA devices");
  static constexpr std::size_t n = Set::size();

 public:
  /// Wraps `module` (kept by reference: it must outlive this object) and copies it to the
  /// other devices of the set.
  DataParallel(M& module, Set, DataParallelOptions options = {})
      : module_(&module), state_(std::make_shared<State>(module, options.bucket_mb)) {
    State* state = state_.get();  // alive while a hook runs: it is the hooks' owner
    each_replica([&](auto r, auto&) {
      const auto& params = std::get<r()>(state->params);
      for (std::size_t k = 0; k != params.size(); ++k)
        params[k].add_grad_hook({state_, [state, r, k] { state->gradient_ready(r(), k); }});
    });
  }

  /// The module's forward on each device's rows of x, gathered on the first device.
  template <class X>
  auto operator()(const X& x) {
    State& s = *state_;
    s.buckets.check_finished();
    if (x.defined() && x.size(0) < std::int64_t(n))
      throw ShapeError("et: DataParallel: a batch of " + std::to_string(x.size(0)) + " rows cannot be split among " +
                       std::to_string(n) + " devices (each needs at least one row)");
    s.synchronize(*module_);
    if (grad_enabled())
      each_replica([&](auto r, auto&) {
        if constexpr (r() > 0)
          for (const auto& p : std::get<r()>(s.params)) p.clear_grad();
      });
    const auto parts = Set{}.scatter(x);
    auto outputs = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{(*module_)(std::get<0>(parts)), std::get<I>(s.replicas)(std::get<I + 1>(parts))...};
    }(std::index_sequence_for<Rest...>{});
    return Set{}.gather(outputs);
  }

  /// The module's parameters (replica 0's).
  auto parameters() const { return module_->parameters(); }
  M& module() noexcept { return *module_; }
  /// Replica I (replica 0 is the module).
  template <std::size_t I>
  auto& replica() noexcept {
    if constexpr (I == 0) return *module_;
    else return std::get<I - 1>(state_->replicas);
  }
  /// One optimizer Opt<T, device> per replica, each on its replica's parameters, with the
  /// same options: `dp.optimizer<et::optim::SGD>({.lr = 0.01})`.
  template <template <class, class> class Opt>
  auto optimizer(const typename Opt<T, D0>::Options& options) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ReplicatedOptimizer<Opt<T, D0>, Opt<T, Rest>...>(
          Opt<T, D0>(module_->parameters(), options), Opt<T, Rest>(std::get<I>(state_->replicas).parameters(), options)...);
    }(std::index_sequence_for<Rest...>{});
  }
  /// The buckets, as parameter indices (for tests and tuning).
  std::vector<std::vector<std::size_t>> buckets() const { return state_->buckets.members(); }

 private:
  template <class F>
  void each_replica(F&& f) {
    Set::for_each([&](auto, auto r) {
      if constexpr (r() == 0) f(r, *module_);
      else f(r, std::get<r() - 1>(state_->replicas));
    });
  }

  /// A tensor of a replica, as synchronize() sees it.
  struct Slot {
    void* data;
    std::size_t bytes;
    bool parameter;
    std::uint64_t version;
  };

  struct State {
    std::tuple<detail::rebind_t<M, Rest>...> replicas;
    std::tuple<std::vector<optim::Parameter<T, D0>>, std::vector<optim::Parameter<T, Rest>>...> params;
    std::array<ncclComm_t, n> comms{};
    std::tuple<Stream<D0>, Stream<Rest>...> comm{Stream<D0>::create(), Stream<Rest>::create()...};
    std::tuple<Event<D0>, Event<Rest>...> ready, done;
    std::array<std::vector<std::uint64_t>, n> synced;  ///< each replica's tensor versions after the last sync

    detail::GradientBuckets buckets;

    State(const M& module, double bucket_mb)
        : replicas{module.to(Rest{})...},
          params{module.parameters(), std::get<detail::rebind_t<M, Rest>>(replicas).parameters()...},
          buckets(detail::parameter_bytes(std::get<0>(params)), bucket_mb * 1024 * 1024, n, "DataParallel") {
      const auto devices = Set::indices();
      ET_NCCL_CHECK(ncclCommInitAll(comms.data(), int(n), devices.data()));
    }
    ~State() {
      for (ncclComm_t c : comms)
        if (c) (void)ncclCommDestroy(c);
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    void gradient_ready(std::size_t r, std::size_t k) {
      if (const auto b = buckets.complete(r, k)) launch(buckets.members()[*b]);
    }

    /// A bucket's gradients, complete on every device's current stream, summed on `comm`.
    void launch(const std::vector<std::size_t>& members) {
      Set::for_each([&](auto dev, auto r) {
        std::get<r()>(ready).record(current_stream(dev));
        std::get<r()>(comm).wait(std::get<r()>(ready));
      });
      ET_NCCL_CHECK(ncclGroupStart());
      Set::for_each([&](auto dev, auto r) {
        StreamGuard<decltype(dev)> guard(std::get<r()>(comm));
        for (const std::size_t k : members) {
          const auto g = std::get<r()>(params)[k].grad();
          et::detail::note_stream_uses(g);  // not reused before the all-reduce ends
          ET_NCCL_CHECK(ncclAllReduce(g.data(), g.data(), std::size_t(g.numel()), dist::detail::nccl_type<T>(), ncclSum,
                                      comms[r()], std::get<r()>(comm).native()));
        }
      });
      ET_NCCL_CHECK(ncclGroupEnd());
      if (buckets.launched_last()) {  // the backward's last bucket: step() reads after it
        Set::for_each([&](auto dev, auto r) {
          std::get<r()>(done).record(std::get<r()>(comm));
          current_stream(dev).wait(std::get<r()>(done));
        });
      }
    }

    template <class Module>
    static std::vector<Slot> slots_of(Module& m) {
      std::vector<Slot> out;
      for_each_tensor(m, [&](const std::string& name, const auto& t) {
        if (!t.defined()) return;
        if (!t.is_contiguous()) throw Error("et: DataParallel: the module's tensor " + name + " is not contiguous");
        const auto& meta = t.autograd_meta();
        using V = typename std::remove_cvref_t<decltype(t)>::value_type;
        out.push_back({const_cast<V*>(t.data()), std::size_t(t.numel()) * sizeof(V), t.requires_grad(),
                       meta ? meta->version->value.load() : 0});
      });
      return out;
    }

    /// Makes every replica's tensors replica 0's, where they may differ (see the file comment).
    void synchronize(M& module) {
      std::array<std::vector<Slot>, n> slots;
      Set::for_each([&](auto, auto r) {
        if constexpr (r() == 0) {
          slots[0] = slots_of(module);
        } else {
          auto& replica = std::get<r() - 1>(replicas);
          replica.train(module.is_training());
          slots[r()] = slots_of(replica);
        }
      });
      for (std::size_t r = 0; r != n; ++r) {
        if (slots[r].size() != slots[0].size())
          throw Error("et: DataParallel: replica " + std::to_string(r) + " holds " + std::to_string(slots[r].size()) +
                      " tensors, the module " + std::to_string(slots[0].size()) + " (a tensor was added or undefined)");
        if (synced[r].size() != slots[r].size()) {  // the first forward: .to() made the replicas equal
          synced[r].resize(slots[r].size());
          for (std::size_t j = 0; j != slots[r].size(); ++j) synced[r][j] = slots[r][j].version;
        }
      }
      std::vector<std::size_t> send;
      for (std::size_t j = 0; j != slots[0].size(); ++j) {
        bool alike = slots[0][j].parameter;
        for (std::size_t r = 1; r != n; ++r) {
          if (slots[r][j].bytes != slots[0][j].bytes)
            throw Error("et: DataParallel: tensor " + std::to_string(j) + " of replica " + std::to_string(r) +
                        " differs in size from the module's");
          alike = alike && slots[r][j].version - synced[r][j] == slots[0][j].version - synced[0][j];
        }
        if (!alike) send.push_back(j);
      }
      if (!send.empty()) {
        ET_NCCL_CHECK(ncclGroupStart());
        Set::for_each([&](auto, auto r) {
          const et::detail::CudaCall on(Set::indices()[r()], "DataParallel broadcast");
          for (const std::size_t j : send)
            ET_NCCL_CHECK(ncclBroadcast(slots[0][j].data, slots[r()][j].data, slots[0][j].bytes, ncclUint8, 0,
                                        comms[r()], on.stream()));
        });
        ET_NCCL_CHECK(ncclGroupEnd());
      }
      for (std::size_t r = 0; r != n; ++r)
        for (std::size_t j = 0; j != slots[r].size(); ++j) synced[r][j] = slots[r][j].version;
    }
  };

  M* module_;
  std::shared_ptr<State> state_;
};

template <class M, class... Ds>
DataParallel(M&, DeviceSet<Ds...>) -> DataParallel<M, DeviceSet<Ds...>>;
template <class M, class... Ds>
DataParallel(M&, DeviceSet<Ds...>, DataParallelOptions) -> DataParallel<M, DeviceSet<Ds...>>;

}  // namespace et::nn
