// A process group: the processes of a distributed job, one GPU each, joined by one NCCL
// communicator (et::dist; collectives in dist/collectives.hpp).
//
//   auto pg = et::dist::init();      // under mpirun/srun, torchrun's variables, or alone
//   pg.rank(), pg.size()             // this process, of how many
//   et::dist::all_reduce(grad, pg);  // sums over the processes, on the device's current stream
//
// init() takes this process's GPU from its local rank: it makes that GPU the only one the
// process sees (CUDA_VISIBLE_DEVICES, itself honoured: the local rank picks among the GPUs it
// lists), so every process's GPU is et::Cuda<0> and one program's types serve every rank.
// Call it before anything else uses CUDA (et::Error otherwise, where that can be told).
//
// A collective that does not complete within the timeout (a rank that never joins it, a
// rank that died) makes a watchdog thread abort the communicator: the GPU work in flight
// ends, a message goes to stderr, and every later call on the group throws et::Error with
// it, rather than the job hanging forever.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "et/dist/bootstrap.hpp"
#include "et/runtime/stream.hpp"
#if defined(ET_WITH_MPI)
#include "et/dist/mpi.hpp"
#endif

/// Checks an NCCL call: et::Error naming the call, NCCL's message and its last error.
#define ET_NCCL_CHECK(call)                                                                              \
  do {                                                                                                   \
    const ncclResult_t et_nccl_status_ = (call);                                                         \
    if (et_nccl_status_ != ncclSuccess)                                                                  \
      throw ::et::Error(std::string("et: NCCL call ") + #call + " failed: " +                             \
                        ncclGetErrorString(et_nccl_status_) + " (" + ncclGetLastError(nullptr) + ") at " + \
                        __FILE__ + ":" + std::to_string(__LINE__));                                      \
  } while (0)

namespace et::dist {

struct InitOptions {
  /// How long to wait for the other processes: to join, and for a collective to complete.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  /// Before each collective, compare every rank's element type and shape (one exchange of
  /// a few bytes through the bootstrap) and throw et::ShapeError naming the ranks that
  /// differ, rather than let NCCL read past a buffer or hang.
  bool check_shapes = true;
  /// Make GPU local_rank this process's only visible GPU (see the file comment; a group of
  /// one process keeps every GPU).
  bool select_device = true;
};

namespace detail {

/// The GPU pending collectives run on, watched: the work each one queued is marked by an
/// event, and one older than the timeout aborts the communicator.
class Watchdog {
 public:
  Watchdog(ncclComm_t comm, std::chrono::milliseconds timeout)
      : comm_(comm), timeout_(timeout), thread_([this] { watch(); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    for (auto& p : pending_) (void)cudaEventDestroy(p.done);
    for (cudaEvent_t e : idle_) (void)cudaEventDestroy(e);
  }

  /// Marks the end of collective `what` on `stream`. Costs the host an event record: the
  /// events are reused, and the watchdog is not woken (it looks every 50 ms), so that a
  /// small collective's launch is not slowed by its watch.
  void watch_until_done(const char* what, int rank, cudaStream_t stream) {
    cudaEvent_t done = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        done = idle_.back();
        idle_.pop_back();
      }
    }
    if (!done) ET_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    ET_CUDA_CHECK(cudaEventRecord(done, stream));
    std::lock_guard lock(mutex_);
    pending_.push_back({done, what, rank, std::chrono::steady_clock::now()});
  }
  /// The message of the abort, or "" while the communicator is good.
  std::string aborted() const {
    if (!aborted_flag_.load(std::memory_order_acquire)) return {};
    std::lock_guard lock(mutex_);
    return aborted_;
  }

 private:
  struct Pending {
    cudaEvent_t done;
    const char* what;  ///< a string literal
    int rank;
    std::chrono::steady_clock::time_point since;
  };

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      while (!pending_.empty() && aborted_.empty()) {
        Pending& front = pending_.front();
        const cudaError_t status = cudaEventQuery(front.done);
        if (status == cudaErrorNotReady) {
          (void)cudaGetLastError();
          if (std::chrono::steady_clock::now() - front.since < timeout_) break;
          aborted_ = std::string("et: dist: ") + front.what + " on rank " + std::to_string(front.rank) +
                     " did not complete within " +
                     std::to_string(timeout_.count()) + " ms (did every rank call it, with the same tensors?); the "
                     "communicator was aborted, and this process group can no longer be used";
          aborted_flag_.store(true, std::memory_order_release);
          std::fprintf(stderr, "%s\n", aborted_.c_str());
          (void)ncclCommAbort(comm_);  // ends the kernels that wait for the missing ranks
          break;
        }
        idle_.push_back(front.done);
        pending_.pop_front();
      }
    }
  }

  ncclComm_t comm_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> idle_;  ///< recorded and completed: free for the next collective
  std::string aborted_;
  std::atomic<bool> aborted_flag_{false};  ///< aborted_ is set (read without the lock)
  bool stop_ = false;
  std::thread thread_;
};

/// Makes the local_rank-th visible GPU the only visible one (before CUDA starts).
inline void select_local_device(int local_rank) {
  std::vector<std::string> visible;
  if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string entry;
    for (const char* c = list;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!entry.empty()) visible.push_back(entry);
        entry.clear();
        if (*c == '\0') break;
      } else {
        entry += *c;
      }
    }
    if (local_rank >= static_cast<int>(visible.size()))
      throw Error("et: dist::init: local rank " + std::to_string(local_rank) + " has no GPU: CUDA_VISIBLE_DEVICES=" +
                  list + " lists " + std::to_string(visible.size()));
  } else {
    visible.push_back(std::to_string(local_rank));
  }
  ::setenv("CUDA_VISIBLE_DEVICES", visible[static_cast<std::size_t>(local_rank)].c_str(), 1);
  int count = 0;
  ET_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count != 1)
    throw Error("et: dist::init: CUDA was already in use in this process when init() ran (it sees " +
                std::to_string(count) + " GPUs, not its own one); call et::dist::init() first, or pass "
                "{.select_device = false} and choose the device yourself");
}

}  // namespace detail

/// The processes of a job and their NCCL communicator. Copies share it; the last one
/// destroys the communicator.
class ProcessGroup {
 public:
  int rank() const noexcept { return state_->boot->rank(); }
  int size() const noexcept { return state_->boot->size(); }
  int local_rank() const noexcept { return state_->boot->local_rank(); }
  /// This process's GPU, as CUDA numbers it in this process (0 after init() selected it).
  int device() const noexcept { return state_->device; }
  /// How the processes found each other: "MPI", "TCP" or "single process".
  const char* bootstrap_kind() const noexcept { return state_->boot->kind(); }
  const InitOptions& options() const noexcept { return state_->options; }
  Bootstrap& bootstrap() const noexcept { return *state_->boot; }

  /// The communicator, for NCCL calls of the caller's own; throws once it was aborted.
  ncclComm_t native() const {
    if (std::string why = state_->watchdog->aborted(); !why.empty()) throw Error(why);
    return state_->comm;
  }
  /// Called after the caller queued collective `what` (a string literal) on `stream`
  /// (collectives.hpp).
  void watch(const char* what, cudaStream_t stream) const {
    state_->watchdog->watch_until_done(what, rank(), stream);
  }

  /// A group over `boot`'s processes on `device`; init() is the usual way.
  ProcessGroup(std::unique_ptr<Bootstrap> boot, int device, InitOptions options)
      : state_(std::make_shared<State>()) {
    state_->boot = std::move(boot);
    state_->device = device;
    state_->options = options;
    ncclUniqueId id{};
    if (state_->boot->rank() == 0) ET_NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string mine(reinterpret_cast<const char*>(&id), state_->boot->rank() == 0 ? sizeof id : 0);
    const std::string root = state_->boot->all_gather(mine)[0];
    if (root.size() != sizeof id) throw Error("et: dist: rank 0 sent no NCCL id (is every rank the same program?)");
    std::memcpy(&id, root.data(), sizeof id);
    et::detail::DeviceGuard guard(device);
    ET_NCCL_CHECK(ncclCommInitRank(&state_->comm, size(), id, rank()));
    state_->watchdog = std::make_unique<detail::Watchdog>(state_->comm, options.timeout);
  }

 private:
  struct State {
    std::unique_ptr<Bootstrap> boot;
    int device = 0;
    InitOptions options;
    ncclComm_t comm = nullptr;
    std::unique_ptr<detail::Watchdog> watchdog;
    ~State() {
      const bool aborted = watchdog && !watchdog->aborted().empty();
      watchdog.reset();
      if (comm && !aborted) (void)ncclCommDestroy(comm);
    }
  };
  std::shared_ptr<State> state_;
};

/// The process group of this job, from its environment: under mpirun or srun, MPI (where
/// etensor was built with it: ET_WITH_MPI); else torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR and MASTER_PORT; else this process alone (a group of one).
inline ProcessGroup init(InitOptions options = {}) {
  std::unique_ptr<Bootstrap> boot;
#if defined(ET_WITH_MPI)
  if (started_by_mpi()) boot = std::make_unique<MpiBootstrap>();
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"))
    if (!std::getenv("WORLD_SIZE"))
      throw Error("et: dist::init: this process was started by mpirun/srun, but etensor was built without MPI "
                  "(ET_WITH_MPI); build with MPI, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
#endif
  if (!boot) boot = tcp_bootstrap_from_environment({.timeout = options.timeout});
  const bool select = options.select_device && boot->size() > 1;  // alone, the process keeps every GPU
  if (select) detail::select_local_device(boot->local_rank());
  int device = 0;
  ET_CUDA_CHECK(cudaGetDevice(&device));
  return ProcessGroup(std::move(boot), select ? 0 : device, options);
}

}  // namespace et::dist
