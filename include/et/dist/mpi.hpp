// The bootstrap of a job started by mpirun or srun (et/dist/bootstrap.hpp): ranks from MPI,
// the local rank from the processes that share this host, all_gather by MPI_Allgatherv.
// Included where etensor is built with MPI (ET_WITH_MPI: CMake's et::dist target when
// find_package(MPI) finds it; by hand, mpicxx's flags and -DET_WITH_MPI=1).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "et/dist/bootstrap.hpp"

#define ET_MPI_CHECK(call)                                                                                \
  do {                                                                                                    \
    const int et_mpi_status_ = (call);                                                                    \
    if (et_mpi_status_ != MPI_SUCCESS) {                                                                  \
      char et_mpi_text_[MPI_MAX_ERROR_STRING] = {};                                                       \
      int et_mpi_length_ = 0;                                                                             \
      MPI_Error_string(et_mpi_status_, et_mpi_text_, &et_mpi_length_);                                     \
      throw ::et::Error(std::string("et: MPI call ") + #call + " failed: " + et_mpi_text_);               \
    }                                                                                                     \
  } while (0)

namespace et::dist {

/// True when mpirun (OpenMPI, MPICH) or srun started this process.
inline bool started_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name)) return true;
  return false;
}

namespace detail {

/// MPI for the whole process: initialized on first use (if the program did not), finalized
/// at exit by whoever initialized it.
inline void ensure_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    ET_MPI_CHECK(MPI_Initialized(&initialized));
    if (initialized) return;
    int provided = 0;
    ET_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  });
}

}  // namespace detail

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap() {
    detail::ensure_mpi();
    ET_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    ET_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    ET_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    MPI_Comm host = MPI_COMM_NULL;
    ET_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host));
    ET_MPI_CHECK(MPI_Comm_rank(host, &local_rank_));
    ET_MPI_CHECK(MPI_Comm_free(&host));
  }
  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;
  ~MpiBootstrap() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int local_rank() const noexcept override { return local_rank_; }
  const char* kind() const noexcept override { return "MPI"; }
  [[noreturn]] void abort_job() noexcept override {
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(EXIT_FAILURE);  // MPI_Abort does not return; if it did, end this process at least
  }

  std::vector<std::string> all_gather(const std::string& bytes) override {
    if (bytes.size() > (1u << 30)) throw Error("et: dist: a bootstrap message over 1 GiB");
    const int mine = static_cast<int>(bytes.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
    ET_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_));
    std::int64_t total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = static_cast<int>(total);
      total += lengths[r];
      if (total > (1 << 30)) throw Error("et: dist: bootstrap messages over 1 GiB in all");
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    ET_MPI_CHECK(MPI_Allgatherv(bytes.data(), mine, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                                comm_));
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    return out;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

}  // namespace et::dist
