// Batch normalization in training with what follows it in a residual block, z = relu(bn(x) +
// r), forward and backward, on the shapes of Table 7's residual networks:
//
//   etensor   et::batch_norm_add(x, r, ..., {.relu = true}) through its backend: two kernels
//             forward (statistics, then z), two backward (the gradient's per-channel sums,
//             then dx and dr) (backend/cuda/batch_norm.hpp)
//   cuDNN     cudnnBatchNormalizationForwardTraining, then z = relu(y + r) (one etensor
//             kernel); backward g = where(z > 0, dz, 0) (one kernel; it is dr too), then
//             cudnnBatchNormalizationBackward: what PyTorch eager runs for nchw float, and what
//             etensor ran before its own kernels
//   limit     the fused passes' bytes at the device-to-device copy bandwidth measured here:
//             forward x twice, r once, z written (4 tensors); backward dz, z, x twice each,
//             dx and dr written (8)
// Each result is checked against etensor's own passes in double on the same values: z, dx,
// dr, dweight and dbias within 1e-5 of each result's largest value, the gradients against the
// reference's backward taken with the checked way's ReLU mask (it may differ from the
// reference's where a pre-activation lies within a float's rounding of 0: a few elements in
// a million at most). cuDNN's error is printed beside etensor's. Timing: bench::median_us (event pairs, median) after warm-up.
//
// Usage: et_bench_batch_norm [--json PATH] [--reps N]   (exit status 1 if a check fails)
#include <et/nn.hpp>

#include "common.cuh"

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;
using Vector = et::Tensor<float, 1, Gpu>;
using Activation = et::Tensor<float, 4, Gpu>;

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

struct Shape {
  const char* network;
  std::int64_t n, c, h, w;
  std::int64_t numel() const { return n * c * h * w; }
};

/// One way's worst error against the double reference, and at how many elements its ReLU
/// mask differs from the reference's.
struct Errors {
  double worst = 0, flips = 0;
};

struct Row {
  std::string network, size;
  double et_forward = 0, et_backward = 0, cudnn_forward = 0, cudnn_backward = 0, limit_forward = 0, limit_backward = 0;
  Errors etensor, cudnn;
  bool ok = true;
};

/// The largest |a - b| over the largest |b| (1 at least): a float result against the double
/// reference.
template <int R>
double relative_error(const et::Tensor<float, R, Gpu>& a, const et::Tensor<double, R, Gpu>& b) {
  return et::max(et::abs(et::cast<double>(a) - b)).item() / std::max(1.0, et::max(et::abs(b)).item());
}

Row measure(cudnnHandle_t handle, const Shape& s, double copy_gbs, int reps) {
  const auto x = et::randn<float>(et::cuda<0>, {s.n, s.c, s.h, s.w}, 1);
  const auto r = et::randn<float>(et::cuda<0>, {s.n, s.c, s.h, s.w}, 2);
  const auto dz = et::randn<float>(et::cuda<0>, {s.n, s.c, s.h, s.w}, 3);
  const Vector weight = et::rand<float>(et::cuda<0>, {s.c}, 4) + 0.5f, bias = et::randn<float>(et::cuda<0>, {s.c}, 5);
  Vector running_mean = et::zeros<float>(et::cuda<0>, {s.c}), running_var = et::ones<float>(et::cuda<0>, {s.c});
  const et::detail::BatchNormGeometry g{s.n, s.c, s.h * s.w, 1e-5, 0.1, true, true, 0, s.c};
  Row row{s.network, std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w)};

  // etensor: its backend's two passes each way.
  const auto z = Activation::allocate(x.shape()), dx = Activation::allocate(x.shape()), dr = Activation::allocate(x.shape());
  const auto mean = Vector::allocate(et::Shape<1>{s.c}), invstd = Vector::allocate(et::Shape<1>{s.c});
  const auto dw = Vector::allocate(et::Shape<1>{s.c}), db = Vector::allocate(et::Shape<1>{s.c});
  const et::detail::cuda_backend::Backend<0> gpu;
  auto et_forward = [&] {
    batch_norm_forward(gpu, g, x, weight, bias, running_mean, running_var, &r, z, mean, invstd,
                       static_cast<const et::Tensor<std::int64_t, 0, Gpu>*>(nullptr));
  };
  auto et_backward = [&] { batch_norm_backward(gpu, g, x, z, dz, weight, mean, invstd, dx, dw, db, &dr); };
  row.et_forward = bench::median_us(et_forward, 5, reps);
  row.et_backward = bench::median_us(et_backward, 5, reps);

  // cuDNN's spatial batch norm and the two elementwise kernels around it.
  cudnnTensorDescriptor_t x_desc{}, channel_desc{};
  check_cudnn(cudnnCreateTensorDescriptor(&x_desc), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnCreateTensorDescriptor(&channel_desc), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(s.n), int(s.c), int(s.h),
                                         int(s.w)),
              "cudnnSetTensor4dDescriptor");
  check_cudnn(cudnnDeriveBNTensorDescriptor(channel_desc, x_desc, CUDNN_BATCHNORM_SPATIAL),
              "cudnnDeriveBNTensorDescriptor");
  check_cudnn(cudnnSetStream(handle, bench::stream()), "cudnnSetStream");
  const auto y = Activation::allocate(x.shape()), zc = Activation::allocate(x.shape());
  const auto gc = Activation::allocate(x.shape()), dxc = Activation::allocate(x.shape());
  const auto mc = Vector::allocate(et::Shape<1>{s.c}), ic = Vector::allocate(et::Shape<1>{s.c});
  const auto dwc = Vector::allocate(et::Shape<1>{s.c}), dbc = Vector::allocate(et::Shape<1>{s.c});
  Vector rm = et::zeros<float>(et::cuda<0>, {s.c}), rv = et::ones<float>(et::cuda<0>, {s.c});
  const float one = 1, zero = 0;
  auto cudnn_forward = [&] {
    check_cudnn(cudnnBatchNormalizationForwardTraining(handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc, x.data(),
                                                       x_desc, y.data(), channel_desc, weight.data(), bias.data(), 0.1,
                                                       rm.data(), rv.data(), 1e-5, mc.data(), ic.data()),
                "cudnnBatchNormalizationForwardTraining");
    Activation out = zc;
    out = et::relu(y + r);
  };
  auto cudnn_backward = [&] {
    Activation masked = gc;
    masked = et::where(zc > 0.0f, dz, 0.0f);
    check_cudnn(cudnnBatchNormalizationBackward(handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x_desc,
                                                x.data(), x_desc, gc.data(), x_desc, dxc.data(), channel_desc,
                                                weight.data(), dwc.data(), dbc.data(), 1e-5, mc.data(), ic.data()),
                "cudnnBatchNormalizationBackward");
  };
  row.cudnn_forward = bench::median_us(cudnn_forward, 5, reps);
  row.cudnn_backward = bench::median_us(cudnn_backward, 5, reps);
  check_cudnn(cudnnDestroyTensorDescriptor(x_desc), "cudnnDestroyTensorDescriptor");
  check_cudnn(cudnnDestroyTensorDescriptor(channel_desc), "cudnnDestroyTensorDescriptor");

  const double bytes = 4.0 * double(s.numel());
  row.limit_forward = 4 * bytes / (copy_gbs * 1e3);
  row.limit_backward = 8 * bytes / (copy_gbs * 1e3);

  // The reference: etensor's own passes in double on the same values (the tests hold them to
  // a host reference written from the formulas).
  using Reference = et::Tensor<double, 4, Gpu>;
  using ReferenceVector = et::Tensor<double, 1, Gpu>;
  const Reference xd = et::cast<double>(x), rd = et::cast<double>(r), dzd = et::cast<double>(dz);
  const ReferenceVector wd = et::cast<double>(weight), bd = et::cast<double>(bias);
  const ReferenceVector rmd = et::zeros<double>(et::cuda<0>, {s.c}), rvd = et::ones<double>(et::cuda<0>, {s.c});
  const auto zd = Reference::allocate(x.shape()), dxd = Reference::allocate(x.shape()), drd = Reference::allocate(x.shape());
  const auto md = ReferenceVector::allocate(et::Shape<1>{s.c}), id = ReferenceVector::allocate(et::Shape<1>{s.c});
  const auto dwd = ReferenceVector::allocate(et::Shape<1>{s.c}), dbd = ReferenceVector::allocate(et::Shape<1>{s.c});
  batch_norm_forward(gpu, g, xd, wd, bd, rmd, rvd, &rd, zd, md, id,
                     static_cast<const et::Tensor<std::int64_t, 0, Gpu>*>(nullptr));
  // One way's results against the reference: z against its z; the gradients against its
  // backward taken with this way's own ReLU mask (a pre-activation within a float's rounding
  // of 0 may fall either side, and one flip moves dweight and dbias by that element's share:
  // about 1e-3 of their size at a million values a channel, 2026-12-01).
  auto errors = [&](const Activation& zw, const Activation& dxw, const Activation& drw, const Vector& dww,
                    const Vector& dbw) {
    const Reference mask = et::cast<double>(zw);
    batch_norm_backward(gpu, g, xd, mask, dzd, wd, md, id, dxd, dwd, dbd, &drd);
    Errors e;
    e.flips = double(x.numel()) - et::sum(et::where((zw > 0.0f) == (zd > 0.0), 1.0, 0.0)).item();
    for (const double error : {relative_error(zw, zd), relative_error(dxw, dxd), relative_error(drw, drd),
                               relative_error(dww, dwd), relative_error(dbw, dbd)})
      e.worst = std::max(e.worst, error);
    return e;
  };
  row.etensor = errors(z, dx, dr, dw, db);
  row.cudnn = errors(zc, dxc, gc, dwc, dbc);
  row.ok = row.etensor.worst <= 1e-5 && row.etensor.flips <= 1e-6 * double(s.numel()) + 2;
  std::printf("%-22s %-16s forward: etensor %8.1f us  cuDNN + relu-add %8.1f us  limit %7.1f us   "
              "backward: etensor %8.1f us  mask + cuDNN %8.1f us  limit %7.1f us   error against double: "
              "etensor %.1e (%.0f masks differ), cuDNN %.1e (%.0f)%s\n",
              row.network.c_str(), row.size.c_str(), row.et_forward, row.cudnn_forward, row.limit_forward,
              row.et_backward, row.cudnn_backward, row.limit_backward, row.etensor.worst, row.etensor.flips,
              row.cudnn.worst, row.cudnn.flips, row.ok ? "" : "  CHECK FAILED");
  std::fflush(stdout);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    std::printf("device: %s\n", et::device_properties(0).name.c_str());
    const double copy_gbs = bench::copy_bandwidth_gbs(reps);
    std::printf("device-to-device copy: %.0f GB/s\n", copy_gbs);
    cudnnHandle_t handle{};
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    const std::vector<Shape> shapes{{"ResNet-56 b128, 16 ch", 128, 16, 32, 32}, {"ResNet-56 b128, 64 ch", 128, 64, 8, 8},
                                    {"ResNet-56 b1024, 16 ch", 1024, 16, 32, 32}, {"ResNet-56 b1024, 64 ch", 1024, 64, 8, 8},
                                    {"ResNet-50 b16, 256 ch", 16, 256, 56, 56}, {"ResNet-50 b16, 2048 ch", 16, 2048, 7, 7}};
    std::vector<Row> rows;
    for (const Shape& s : shapes) rows.push_back(measure(handle, s, copy_gbs, reps));
    check_cudnn(cudnnDestroy(handle), "cudnnDestroy");
    bool ok = true;
    for (const Row& r : rows) ok = ok && r.ok;
    std::printf("\n%s\n", ok ? "PASS: etensor agrees with its double-precision passes" : "FAIL: a check failed (see above)");
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\n  \"benchmark\": \"batch_norm\",\n  \"device\": " << bench::json_string(et::device_properties(0).name)
          << ",\n  \"copy_gbs\": " << copy_gbs << ",\n  \"ok\": " << (ok ? "true" : "false") << ",\n  \"results\": [\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << "    {\"workload\": " << bench::json_string(r.network) << ", \"size\": " << bench::json_string(r.size)
            << ", \"etensor_forward_us\": " << r.et_forward << ", \"cudnn_forward_us\": " << r.cudnn_forward
            << ", \"limit_forward_us\": " << r.limit_forward << ", \"etensor_backward_us\": " << r.et_backward
            << ", \"cudnn_backward_us\": " << r.cudnn_backward << ", \"limit_backward_us\": " << r.limit_backward
            << ", \"etensor_error\": " << r.etensor.worst << ", \"cudnn_error\": " << r.cudnn.worst
            << ", \"ok\": " << (r.ok ? "true" : "false") << "}"
            << (i + 1 < rows.size() ? "," : "") << "\n";
      }
      out << "  ]\n}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_batch_norm: %s\n", e.what());
    return 1;
  }
}
