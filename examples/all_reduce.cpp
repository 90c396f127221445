// Sums a tensor over the processes of a job, one GPU each (et::dist), and checks the sum:
//
//   mpirun -np 2 ./all_reduce                     # MPI starts the processes
//   WORLD_SIZE=2 RANK=0 MASTER_ADDR=host0 MASTER_PORT=29500 ./all_reduce   # and RANK=1: as torchrun
//   ./all_reduce                                  # one process: a group of one
//
// Without a GPU it says so and exits with 77 (CTest's "skipped").
#include <et/dist.hpp>

#include <cstdio>

int main() try {
  // [guide:dist]
  et::dist::ProcessGroup pg = et::dist::init();  // first: it picks this process's GPU
  auto t = et::full<float>(et::cuda<0>, {4}, float(pg.rank() + 1));  // every process's GPU is Cuda<0>
  et::dist::all_reduce(t, pg);  // now 1 + 2 + ... + size on every rank
  et::dist::barrier(pg);
  // [guide:end]
  const float want = float(pg.size() * (pg.size() + 1) / 2);
  bool ok = true;
  for (const float v : t.to_vector()) ok = ok && v == want;
  std::printf("rank %d of %d (%s): sum %.0f, expected %.0f: %s\n", pg.rank(), pg.size(), pg.bootstrap_kind(),
              t.to_vector()[0], want, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
} catch (const et::CudaError& e) {
  std::printf("all_reduce needs a GPU (%s)\n", e.what());
  return 77;
}
