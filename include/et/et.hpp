// etensor: everything. CUDA evaluation is available when this file is compiled by nvcc;
// plain C++ files get CPU evaluation plus CUDA allocation, copies and device queries.
#pragma once

#include "et/config.hpp"
#include "et/device.hpp"
#include "et/expr/assign.hpp"
#include "et/expr/operators.hpp"
#include "et/layout.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/linalg.hpp"
#include "et/ops/nn.hpp"
#include "et/ops/reduce.hpp"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/dispatch.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"
