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
// The local rank is read from the launcher's variables (dist/launcher.hpp) BEFORE MPI is
// initialized, since MPI_Init may start CUDA; where no launcher says it, from MPI's ranks on
// this host. Call init() before anything else uses CUDA (et::Error otherwise). A rank whose
// init() fails tells the others, and every rank throws et::Error naming it.
//
// The job ends together: a rank that dies (its connection to rank 0 closes without a
// goodbye, dist/peer_watch.hpp) makes every other rank print why and end, with MPI_Abort
// under mpirun; a rank that left (destroyed its group) while another still waits for it in
// a collective ends that one 2 s later (dist/watchdog.hpp). A collective that does not
// complete within the timeout aborts the communicator: the GPU work in flight ends, a
// message goes to stderr, and every later call on the group throws et::Error with it.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "et/dist/bootstrap.hpp"
#include "et/dist/launcher.hpp"
#include "et/dist/peer_watch.hpp"
#include "et/dist/watchdog.hpp"
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
  /// Watch the other ranks (a TCP connection from each rank to rank 0): when one dies, or
  /// leaves while this rank waits for it, print why and end this process and the job.
  bool watch_peers = true;
  /// With watch_peers: end the job (MPI_Abort under mpirun) when another rank died or this
  /// one waits in vain for a rank that left. false: abort the communicator only (later
  /// calls throw et::Error; a host exchange through MPI may still wait).
  bool end_job_on_peer_failure = true;
};

namespace detail {

/// Makes the local_rank-th visible GPU the only visible one (before CUDA starts); a list of
/// one GPU is kept as the launcher made it. `source` says where the local rank came from,
/// for messages.
inline void select_local_device(int local_rank, const std::string& source) {
  std::vector<std::string> visible;
  std::size_t index = static_cast<std::size_t>(local_rank);
  const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
  if (list) {
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
    if (visible.size() == 1) {  // already narrowed to this process's GPU (srun --gpus-per-task=1, say)
      index = 0;
    } else if (local_rank >= static_cast<int>(visible.size()))
      throw Error("et: dist::init: local rank " + std::to_string(local_rank) + " (" + source +
                  ") has no GPU: CUDA_VISIBLE_DEVICES=" + list + " lists " + std::to_string(visible.size()));
  } else {
    visible.push_back(std::to_string(local_rank));
    index = 0;
  }
  const std::string mine = visible[index];
  ::setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError("et: dist::init: CUDA sees no GPU with CUDA_VISIBLE_DEVICES=" + mine + " (local rank " +
                        std::to_string(local_rank) + " from " + source + ", CUDA_VISIBLE_DEVICES was " +
                        (list ? list : "unset") + "): " + cudaGetErrorString(status),
                    status);
  }
  if (count != 1)
    throw Error("et: dist::init: CUDA was already in use in this process when init() ran (it sees " +
                std::to_string(count) + " GPUs, not its own one); call et::dist::init() first, or pass "
                "{.select_device = false} and choose the device yourself");
}

/// Runs `step`, keeping what it threw (nothing, once something was kept) for agree_on_init.
template <class Step>
void keep_failure(std::exception_ptr& failure, Step&& step) {
  if (failure) return;
  try {
    step();
  } catch (const Error&) {
    failure = std::current_exception();
  }
}

/// Every rank's init failure, told to every rank before any throws (a rank that threw alone
/// would leave the others waiting for it): a failing rank rethrows its own error, the
/// others throw et::Error (et::CudaError where the failure was CUDA's) naming the ranks.
inline void agree_on_init(Bootstrap& boot, const std::exception_ptr& failure) {
  std::string mine;
  if (failure) try {
      std::rethrow_exception(failure);
    } catch (const CudaError& e) {
      mine = std::string("C") + e.what();
    } catch (const Error& e) {
      mine = std::string("E") + e.what();
    }
  const std::vector<std::string> all = boot.size() > 1 ? boot.all_gather(mine) : std::vector<std::string>{mine};
  if (failure) std::rethrow_exception(failure);
  std::string others;
  bool cuda = false;
  for (std::size_t r = 0; r != all.size(); ++r)
    if (!all[r].empty()) {
      others += (others.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") + all[r].substr(1);
      cuda = cuda || all[r][0] == 'C';
    }
  if (others.empty()) return;
  const std::string message = "et: dist::init failed on another rank (" + others + ")";
  if (cuda) throw CudaError(message, int(cudaErrorNoDevice));
  throw Error(message);
}

}  // namespace detail

/// The processes of a job and their NCCL communicator. Copies share it; the last one
/// destroys the communicator and tells the other ranks this one left.
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

  /// The communicator, for NCCL calls of the caller's own; throws once it was aborted, or
  /// once another rank left the group (no collective could complete).
  ncclComm_t native() const {
    if (std::string why = state_->aborted(); !why.empty()) throw Error(why);
    if (const auto gone = state_->peers ? state_->peers->departed() : std::nullopt)
      throw Error("et: dist: rank " + std::to_string(gone->rank) +
                  (gone->died ? " died" : " left the group") + ", so no collective can complete on rank " +
                  std::to_string(rank()));
    return state_->comm;
  }
  /// Called after the caller queued collective `what` (a string literal) on `stream`
  /// (collectives.hpp).
  void watch(const char* what, cudaStream_t stream) const { state_->watchdog->watch_until_done(what, stream); }
  /// Every rank's `bytes` through the bootstrap, in rank order, watched: a rank that leaves
  /// meanwhile ends this one rather than leave it waiting.
  std::vector<std::string> exchange(const std::string& bytes) const {
    (void)native();
    const detail::Watchdog::Exchange watched(*state_->watchdog, "an exchange");
    return state_->boot->all_gather(bytes);
  }
  /// Runs `call`, an NCCL call that may wait on the host for the other ranks, watched as
  /// an exchange is (`what`: a string literal).
  template <class Call>
  void host_wait(const char* what, Call&& call) const {
    const detail::Watchdog::Exchange watched(*state_->watchdog, what);
    call();
  }

  /// A group over `boot`'s processes on `device`; init() is the usual way.
  ProcessGroup(std::unique_ptr<Bootstrap> boot, int device, InitOptions options)
      : state_(std::make_shared<State>()) {
    State& s = *state_;
    s.boot = std::move(boot);
    s.device = device;
    s.options = options;
    State* state = state_.get();  // outlives the threads that call back: it owns them
    if (options.watch_peers && size() > 1)
      s.peers = std::make_unique<PeerWatch>(*s.boot, options.timeout,
                                            [state](const Departure& d) { state->departed(d); });
    ncclUniqueId id{};
    if (rank() == 0) ET_NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string mine(reinterpret_cast<const char*>(&id), rank() == 0 ? sizeof id : 0);
    const std::string root = s.boot->all_gather(mine)[0];
    if (root.size() != sizeof id) throw Error("et: dist: rank 0 sent no NCCL id (is every rank the same program?)");
    std::memcpy(&id, root.data(), sizeof id);
    // Every connection at init, none made lazily inside a later collective, where the host
    // would wait for a peer in the NCCL call itself (NCCL 2.22+ connects at first use by
    // default): a collective then only queues work, and the watchdog sees what waits.
    // A value the user set stays.
    ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    {
      et::detail::DeviceGuard guard(device);
      ncclComm_t comm = nullptr;
      ET_NCCL_CHECK(ncclCommInitRank(&comm, size(), id, rank()));
      std::lock_guard lock(s.mutex);
      s.comm = comm;
    }
    s.watchdog = std::make_unique<detail::Watchdog>(
        rank(), options.timeout, s.peers.get(), [state](const std::string& why, bool gone) { state->stuck(why, gone); });
    std::lock_guard lock(s.mutex);
    s.ready = true;
  }

 private:
  struct State {
    std::unique_ptr<Bootstrap> boot;
    int device = 0;
    InitOptions options;
    mutable std::mutex mutex;  // guards comm, ready and why
    ncclComm_t comm = nullptr;
    bool ready = false;  // the communicator and watchdog are built
    std::string why;     // why the communicator was aborted
    std::atomic<bool> is_aborted{false};
    std::unique_ptr<PeerWatch> peers;
    std::unique_ptr<detail::Watchdog> watchdog;

    std::string aborted() const {
      if (!is_aborted.load(std::memory_order_acquire)) return {};
      std::lock_guard lock(mutex);
      return why;
    }
    /// Aborts the communicator (once) with `message`; ends the job where a peer is gone.
    void stuck(const std::string& message, bool peer_gone) {
      {
        std::lock_guard lock(mutex);
        if (!why.empty()) return;
        why = message;
        is_aborted.store(true, std::memory_order_release);
        std::fprintf(stderr, "%s\n", message.c_str());
        if (comm) (void)ncclCommAbort(comm);  // ends the kernels that wait for the missing ranks
        comm = nullptr;
      }
      if (peer_gone && options.end_job_on_peer_failure) {
        std::fprintf(stderr, "et: dist: ending rank %d and the job\n", boot->rank());
        std::fflush(stderr);
        boot->abort_job();
      }
    }
    /// On the peer watch's thread: a rank that died ends this one at once. One that left is
    /// the watchdog's to judge (only a rank that still waits for it is stuck), except while
    /// the communicator is being built, which it can no longer join: if that has not ended
    /// within the grace, this rank is stuck in it.
    void departed(const Departure& d) {
      const std::string who = "rank " + std::to_string(d.rank);
      const std::string me = "rank " + std::to_string(boot->rank());
      if (d.died) return stuck("et: dist: " + who + " died (its process ended without leaving the group); " + me +
                                   " aborted its communicator",
                               true);
      const auto is_ready = [this] {
        std::lock_guard lock(mutex);
        return ready;
      };
      if (is_ready()) return;
      std::this_thread::sleep_for(detail::Watchdog::departure_grace);
      if (is_ready()) return;
      stuck("et: dist: " + who + " left while " + me + " was joining the communicator", true);
    }
    ~State() {
      const bool was_aborted = is_aborted.load();
      watchdog.reset();
      ncclComm_t c = nullptr;
      {
        std::lock_guard lock(mutex);
        c = std::exchange(comm, nullptr);
      }
      if (c && !was_aborted) (void)ncclCommDestroy(c);
      peers.reset();  // goodbye: after this rank's own collectives completed
    }
  };
  std::shared_ptr<State> state_;
};

/// The process group of this job, from its environment: under mpirun or srun, MPI (where
/// etensor was built with it: ET_WITH_MPI); else torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR and MASTER_PORT; else this process alone (a group of one).
inline ProcessGroup init(InitOptions options = {}) {
  // The GPU first, where the launcher names the local rank: MPI_Init may start CUDA.
  const LaunchInfo launch = launch_info_from_environment();
  std::exception_ptr failure;
  bool selected = false;
  if (options.select_device && launch.local_rank && launch.size.value_or(1) > 1)
    detail::keep_failure(failure, [&] {
      detail::select_local_device(*launch.local_rank, std::string(launch.launcher) + "'s " +
                                                          launch.local_rank_variable);
      selected = true;
    });
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
  if (select && !selected)  // no launcher variable: the bootstrap's local rank
    detail::keep_failure(failure, [&] { detail::select_local_device(boot->local_rank(), "the ranks on this host"); });
  int device = 0;
  detail::keep_failure(failure, [&] { ET_CUDA_CHECK(cudaGetDevice(&device)); });
  detail::agree_on_init(*boot, failure);
  return ProcessGroup(std::move(boot), select ? 0 : device, options);
}

}  // namespace et::dist
