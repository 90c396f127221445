// Several processes, one GPU each (et::dist): the process group (dist/process_group.hpp:
// init() from MPI, torchrun's variables or one process alone), its collectives
// (dist/collectives.hpp), et::nn::DistributedDataParallel (nn/ddp.hpp) and its sharded
// optimizer state, et::nn::ShardedDataParallel (nn/sharded.hpp); and, in one
// process over several GPUs, et::nn::DataParallel (nn/data_parallel.hpp). Needs NCCL (and
// MPI for mpirun/srun jobs): link CMake's et::dist, or by hand -lnccl (and mpicxx's flags
// with -DET_WITH_MPI=1).
#pragma once

#include "et/et.hpp"
#include "et/dist/collectives.hpp"
#include "et/dist/process_group.hpp"
#include "et/nn/data_parallel.hpp"
#include "et/nn/ddp.hpp"
#include "et/nn/sharded.hpp"
