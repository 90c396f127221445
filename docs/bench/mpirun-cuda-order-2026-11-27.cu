// Which order of MPI_Init and CUDA_VISIBLE_DEVICES works under this mpirun?
#include <mpi.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "after";
  const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  std::string mine = lr ? lr : "0";
  if (std::string(mode) == "before") setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
  int provided = 0;
  if (std::string(mode) == "after-mt") MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(&argc, &argv);
  int rank = 0; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm host; MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  int local = 0; MPI_Comm_rank(host, &local);
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  if (std::string(mode) != "before") setenv("CUDA_VISIBLE_DEVICES", std::to_string(local).c_str(), 1);
  int count = -1;
  cudaError_t e = cudaGetDeviceCount(&count);
  std::printf("mode %s rank %d: env local rank %s, MPI local rank %d, CUDA_VISIBLE_DEVICES after MPI_Init: %s, now %s: count %d (%s)\n",
              mode, rank, lr ? lr : "unset", local, before ? before : "unset", std::getenv("CUDA_VISIBLE_DEVICES"), count, cudaGetErrorString(e));
  MPI_Finalize();
}
