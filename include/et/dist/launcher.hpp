// What the program that started this process says about it, read from the environment
// before anything else runs: mpirun (OpenMPI, MPICH/Hydra, Intel MPI), srun, or torchrun.
// et::dist::init() takes the local rank from here to choose this process's GPU BEFORE MPI
// is initialized, because MPI_Init may start CUDA (a CUDA-aware transport, a topology
// probe) and CUDA reads CUDA_VISIBLE_DEVICES once, when it starts. Host code only.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include "et/runtime/error.hpp"

namespace et::dist {

namespace detail {

/// An environment variable as a non-negative int; nullopt when unset.
inline std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < 0 || value > 1 << 30)
    throw Error(std::string("et: dist: ") + name + "=" + text + " is not a non-negative integer");
  return static_cast<int>(value);
}

}  // namespace detail

/// This process's place in its job as the launcher's variables give it.
struct LaunchInfo {
  const char* launcher = nullptr;  ///< "OpenMPI", "MPICH", "Slurm", "torchrun", or nullptr: none seen
  std::optional<int> local_rank;   ///< among the processes of this host
  std::optional<int> local_size;   ///< how many processes this host runs, where told
  std::optional<int> size;         ///< how many processes the job has, where told
  std::string local_rank_variable; ///< the variable local_rank came from, for messages
};

/// The first launcher whose variables are set, in this order: OpenMPI
/// (OMPI_COMM_WORLD_LOCAL_RANK), MPICH/Hydra and Intel MPI (MPI_LOCALRANKID), Slurm's srun
/// (SLURM_LOCALID, where SLURM_STEP_ID says a step runs), torchrun (LOCAL_RANK).
/// et::Error when a variable is set but not a non-negative integer.
inline LaunchInfo launch_info_from_environment() {
  struct Source {
    const char* launcher;
    const char* local_rank;
    const char* local_size;
    const char* size;
    const char* required;  ///< set by that launcher alongside (nullptr: local_rank alone)
  };
  static constexpr Source sources[] = {
      {"OpenMPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE", nullptr},
      {"MPICH", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_SIZE", nullptr},
      {"Slurm", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS", "SLURM_STEP_ID"},
      {"torchrun", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", nullptr},
  };
  for (const Source& s : sources) {
    if (!std::getenv(s.local_rank) || (s.required && !std::getenv(s.required))) continue;
    LaunchInfo info{s.launcher, detail::env_int(s.local_rank), std::nullopt, detail::env_int(s.size), s.local_rank};
    if (std::getenv(s.local_size)) {
      // Slurm's SLURM_NTASKS_PER_NODE may read "2(x3)" on uneven nodes: a size only where plain.
      const char* text = std::getenv(s.local_size);
      char* end = nullptr;
      const long n = std::strtol(text, &end, 10);
      if (end != text && *end == '\0' && n > 0 && n <= 1 << 30) info.local_size = static_cast<int>(n);
    }
    if (info.local_size && *info.local_rank >= *info.local_size)
      throw Error(std::string("et: dist: ") + s.local_rank + "=" + std::to_string(*info.local_rank) + " but " +
                  s.local_size + "=" + std::to_string(*info.local_size) + ": a local rank must be below it");
    return info;
  }
  return {};
}

}  // namespace et::dist
