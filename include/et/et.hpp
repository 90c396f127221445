// etensor: everything: the core (et/core.hpp) plus matrix products (cuBLASLt / Eigen),
// convolution and pooling (cuDNN / im2col + Eigen). CUDA evaluation is available when
// this file is compiled by nvcc; plain C++ files get CPU evaluation plus CUDA allocation,
// copies and device queries.
#pragma once

// First, so that a device-mix error, a "needs nvcc" error or an assignment's static check
// (whose messages live in these three) is introduced by the shortest include chain: two
// lines of "In file included from" rather than three or more.
#include "et/device_mismatch.hpp"
#include "et/backend/cuda/unavailable.hpp"
#include "et/exec/assign.hpp"

#include "et/derivatives/index.hpp"
#include "et/derivatives/linalg.hpp"
#include "et/derivatives/linear.hpp"
#include "et/derivatives/nn.hpp"
#include "et/core.hpp"
#include "et/ops/linalg.hpp"
#include "et/ops/attention.hpp"
#include "et/ops/matvec_pair.hpp"
#include "et/ops/index.hpp"
#include "et/ops/join.hpp"
#include "et/ops/scan.hpp"
#include "et/ops/nn.hpp"
#include "et/nn/loss.hpp"
#include "et/optim/optimizers.hpp"
#include "et/interop/eigen.hpp"
#include "et/interop/from_blob.hpp"
#include "et/io/print.hpp"
#if __has_include(<dlpack/dlpack.h>)
#include "et/interop/dlpack.hpp"
#endif
