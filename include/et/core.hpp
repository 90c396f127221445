// etensor's light core: devices, tensors, views, fused elementwise expressions,
// reductions, creation and the runtime. No Eigen, cuBLAS(Lt) or cuDNN: a translation unit
// that needs only these compiles several times faster than with et/et.hpp (which adds
// matrix products, convolution and pooling). CUDA evaluation is available when this file
// is compiled by nvcc; plain C++ files get CPU evaluation plus CUDA allocation, copies and
// device queries. Autograd (autograd/) covers everything here.
#pragma once

// First, so that a device-mix error (whose message lives there) is introduced by the
// shortest include chain: two lines of "In file included from" rather than three or more.
#include "et/device_mismatch.hpp"
#include "et/backend/cuda/unavailable.hpp"

#include "et/derivatives/fused.hpp"
#include "et/autograd/graph.hpp"
#include "et/derivatives/reduce.hpp"
#include "et/derivatives/softmax.hpp"
#include "et/autograd/views.hpp"
#include "et/config.hpp"
#include "et/device.hpp"
#include "et/device_set.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/statement.hpp"
#include "et/expr/operators.hpp"
#include "et/layout.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/reduce.hpp"
#include "et/ops/softmax.hpp"
#include "et/runtime/allocator.hpp"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/dispatch.hpp"
#include "et/runtime/error.hpp"
#include "et/runtime/graph.hpp"
#include "et/runtime/stream.hpp"
#include "et/runtime/threads.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"
