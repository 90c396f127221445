// Probe: how fast can a row-reduction read 4096 x 4096 floats with TEAM threads a row?
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
constexpr int N = 4096;
template <int TEAM, bool LSE>
__global__ void __launch_bounds__(256, 4) rows(const float4* __restrict__ in, float* out) {
  __shared__ float sm[8], ss[8];
  const int rows_per_block = 256 / TEAM;
  const int row = blockIdx.x * rows_per_block + threadIdx.x / TEAM;
  const int lane = threadIdx.x % TEAM;
  const float4* x = in + (size_t)row * (N / 4);
  float m = -INFINITY, s = 0.f;
#pragma unroll 4
  for (int j = lane; j < N / 4; j += TEAM) {
    float4 v = x[j];
    if (LSE) {
      float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
      if (vm > m) { s *= __expf(m - vm); m = vm; }
      s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
    } else {
      m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
      s += v.x + v.y + v.z + v.w;
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    float om = __shfl_xor_sync(~0u, m, o), os = __shfl_xor_sync(~0u, s, o);
    if (LSE) { float nm = fmaxf(m, om); s = s * __expf(m - nm) + os * __expf(om - nm); m = nm; }
    else { m = fmaxf(m, om); s += os; }
  }
  if (TEAM > 32) {
    const int w = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) { sm[w] = m; ss[w] = s; }
    __syncthreads();
    if (lane != 0) return;
    const int first = w;
    for (int k = 1; k < TEAM / 32; ++k) {
      float om = sm[first + k], os = ss[first + k];
      if (LSE) { float nm = fmaxf(m, om); s = s * __expf(m - nm) + os * __expf(om - nm); m = nm; }
      else { m = fmaxf(m, om); s += os; }
    }
  } else if (lane != 0) return;
  out[row] = LSE ? m + __logf(s) : m + s;
}
template <class F> float time_us(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 3; ++r) f();
  for (int r = 0; r < 30; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
template <int TEAM, bool LSE> void run(const float4* in, float* out, float copy_us) {
  const int grid = N / (256 / TEAM);
  float us = time_us([&] { rows<TEAM, LSE><<<grid, 256>>>(in, out); });
  std::printf("%s team %3d grid %4d: %7.2f us = %.2f of copy (read only)\n", LSE ? "lse    " : "sum/max", TEAM, grid, us, copy_us / us);
}
int main() {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0); std::printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  const size_t bytes = size_t(N) * N * 4;
  float *in, *out, *big_a, *big_b; cudaMalloc(&in, bytes); cudaMalloc(&out, N * 4);
  cudaMalloc(&big_a, 1 << 30); cudaMalloc(&big_b, 1 << 30);
  cudaMemset(in, 0, bytes);
  float copy = time_us([&] { cudaMemcpyAsync(big_b, big_a, 1 << 30, cudaMemcpyDeviceToDevice); });
  const double bw = 2.0 * (1 << 30) / (copy * 1e-6);
  const float limit = bytes / bw * 1e6;
  std::printf("copy 1 GiB: %.1f us, %.2f TB/s; the 64 MiB read at it: %.2f us\n", copy, bw / 1e12, limit);
  run<32, false>((const float4*)in, out, limit); run<64, false>((const float4*)in, out, limit);
  run<128, false>((const float4*)in, out, limit); run<256, false>((const float4*)in, out, limit);
  run<32, true>((const float4*)in, out, limit); run<64, true>((const float4*)in, out, limit);
  run<128, true>((const float4*)in, out, limit); run<256, true>((const float4*)in, out, limit);
  std::printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
