// Microbenchmarks that measure the Table-1 hardware parameters of the performance model
// (perf_model.h). Run once per GPU (results cached on disk by LoadOrCalibrateGpu); not in the
// request path, so they allocate freely. Every kernel's output feeds a sink so that nothing is
// optimised away; timings are medians of several event-timed runs after a warm-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/gpu/device_set.h"
#include "core/predict/tahoe/perf_model.h"

namespace grove {
namespace {

constexpr int kSmemWords = 4096;  // 32 KiB of uint64 per block

__device__ __forceinline__ uint32_t Lcg(uint32_t x) { return x * 1664525u + 1013904223u; }

// Random 8-byte shared-memory reads (independent addresses, as lanes walking different nodes).
__global__ void SmemReadKernel(int iters, uint64_t* sink) {
  __shared__ uint64_t s[kSmemWords];
  for (int i = threadIdx.x; i < kSmemWords; i += blockDim.x) s[i] = i * 0x9E3779B97F4A7C15ull;
  __syncthreads();
  uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t acc = 0;
  for (int i = 0; i < iters; ++i) {
    x = Lcg(x);
    acc ^= s[x & (kSmemWords - 1)];
  }
  if (acc == 0x12345) sink[0] = acc;
}

// Coalesced 8-byte shared-memory writes (staging rows or a forest part).
__global__ void SmemWriteKernel(int iters, uint64_t* sink) {
  __shared__ uint64_t s[kSmemWords];
  uint64_t v = threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    s[(i * blockDim.x + threadIdx.x) & (kSmemWords - 1)] = v;
    v += 3;
  }
  __syncthreads();
  if (s[threadIdx.x] == 0x12345) sink[0] = v;
}

// Dependent shared-memory loads (one thread).
__global__ void SmemLatencyKernel(int iters, uint64_t* sink) {
  __shared__ uint32_t s[kSmemWords];
  for (int i = threadIdx.x; i < kSmemWords; i += blockDim.x) s[i] = (i * 2654435761u + 7u) & (kSmemWords - 1);
  __syncthreads();
  if (threadIdx.x != 0) return;
  uint32_t x = 0;
  for (int i = 0; i < iters; ++i) x = s[x];
  sink[0] = x;
}

// Dependent global loads through an L2-resident random cycle (one thread).
__global__ void GmemLatencyKernel(const uint32_t* next, int iters, uint64_t* sink) {
  uint32_t x = 0;
  for (int i = 0; i < iters; ++i) x = next[x];
  sink[0] = x;
}

__global__ void CoalescedReadKernel(const uint4* p, int64_t n, uint64_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345) sink[0] = acc;
}

// Random 4-byte global reads in a region of `mask + 1` floats.
__global__ void UncoalescedReadKernel(const uint32_t* p, uint32_t mask, int iters, uint64_t* sink) {
  uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (int i = 0; i < iters; ++i) {
    x = Lcg(x);
    acc ^= __ldg(p + (x & mask));
  }
  if (acc == 0x12345) sink[0] = acc;
}

// The shared-data block reduction: every thread stores a partial, one thread per row adds them.
__global__ void BlockReduceKernel(int rounds, double* out) {
  __shared__ double s[1024];
  const int rows = 32, groups = blockDim.x / rows;
  double acc = 0;
  for (int k = 0; k < rounds; ++k) {
    s[threadIdx.x] = threadIdx.x + k;
    __syncthreads();
    if (threadIdx.x < rows) {
      double t = 0;
      for (int g = 0; g < groups; ++g) t += s[g * rows + threadIdx.x];
      acc += t;
    }
    __syncthreads();
  }
  if (threadIdx.x < rows) out[blockIdx.x * rows + threadIdx.x] = acc;
}

// The splitting global reduction: partials written per part, then summed per row.
__global__ void PartialWriteKernel(double* ws, int64_t rows, int parts) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  for (int p = 0; p < parts; ++p) ws[p * rows + r] = r + p;
}
__global__ void PartialReduceKernel(const double* ws, int64_t rows, int parts, float* out) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  double s = 0;
  for (int p = 0; p < parts; ++p) s += ws[p * rows + r];
  out[r] = static_cast<float>(s);
}

__global__ void EmptyKernel() {}

struct Bench {
  cudaStream_t stream = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  std::string* error;
  bool ok = true;

  bool Check(cudaError_t e, const char* what) {
    if (e != cudaSuccess && ok) {
      ok = false;
      *error = std::string(what) + ": " + cudaGetErrorString(e);
    }
    return e == cudaSuccess;
  }
  // Median seconds of `fn` (enqueues work on `stream`) over `reps` runs after one warm-up.
  double Time(const std::function<void()>& fn, int reps = 5) {
    if (!ok) return 0;
    fn();
    Check(cudaGetLastError(), "launch");
    Check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<double> t;
    for (int i = 0; i < reps && ok; ++i) {
      Check(cudaEventRecord(a, stream), "event");
      fn();
      Check(cudaGetLastError(), "launch");
      Check(cudaEventRecord(b, stream), "event");
      Check(cudaEventSynchronize(b), "sync");
      float ms = 0;
      Check(cudaEventElapsedTime(&ms, a, b), "elapsed");
      t.push_back(ms * 1e-3);
    }
    if (t.empty()) return 0;
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

}  // namespace

bool GpuIdentity(int device, std::string* name, std::string* driver) {
  if (device < 0 || device >= gpu::VisibleGpuCount()) return false;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return false;
  int version = 0;
  cudaDriverGetVersion(&version);
  *name = prop.name;
  *driver = std::to_string(version);
  return true;
}

bool MeasureGpuHardware(int device, GpuHardwareParams* p, std::string* error) {
  if (!GpuIdentity(device, &p->device_name, &p->driver)) {
    *error = "no such GPU";
    return false;
  }
  Bench bench;
  bench.error = error;
  if (!bench.Check(cudaSetDevice(device), "cudaSetDevice")) return false;
  cudaDeviceProp prop;
  bench.Check(cudaGetDeviceProperties(&prop, device), "properties");
  p->sm_count = prop.multiProcessorCount;
  p->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  p->smem_per_block = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  p->smem_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);

  const int64_t big_bytes = int64_t{512} << 20;  // coalesced stream, beyond L2
  const int64_t l2_floats = int64_t{8} << 20;    // 32 MiB random-read region
  const int lat_nodes = 1 << 20;                 // 4 MiB pointer cycle
  void* d_big = nullptr;
  uint32_t* d_rand = nullptr;
  uint32_t* d_next = nullptr;
  uint64_t* d_sink = nullptr;
  double* d_ws = nullptr;
  float* d_out = nullptr;
  void* h_pinned = nullptr;
  const int64_t copy_bytes = int64_t{64} << 20;
  const int64_t red_rows = 1 << 20, red_parts = 8;
  bench.Check(cudaStreamCreateWithFlags(&bench.stream, cudaStreamNonBlocking), "stream");
  bench.Check(cudaEventCreate(&bench.a), "event");
  bench.Check(cudaEventCreate(&bench.b), "event");
  bench.Check(cudaMalloc(&d_big, big_bytes), "cudaMalloc");
  bench.Check(cudaMalloc(&d_rand, l2_floats * 4), "cudaMalloc");
  bench.Check(cudaMalloc(&d_next, lat_nodes * 4), "cudaMalloc");
  bench.Check(cudaMalloc(&d_sink, 64), "cudaMalloc");
  bench.Check(cudaMalloc(&d_ws, red_rows * red_parts * 8), "cudaMalloc");
  bench.Check(cudaMalloc(&d_out, red_rows * 4), "cudaMalloc");
  bench.Check(cudaMallocHost(&h_pinned, copy_bytes), "cudaMallocHost");
  if (bench.ok) {
    bench.Check(cudaMemsetAsync(d_big, 1, big_bytes, bench.stream), "memset");
    bench.Check(cudaMemsetAsync(d_rand, 2, l2_floats * 4, bench.stream), "memset");
    // A random single cycle over lat_nodes entries (Sattolo), built on the host.
    std::vector<uint32_t> next(lat_nodes);
    for (int i = 0; i < lat_nodes; ++i) next[i] = i;
    uint64_t s = 88172645463325252ull;
    for (int i = lat_nodes - 1; i > 0; --i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      std::swap(next[i], next[s % i]);
    }
    bench.Check(cudaMemcpy(d_next, next.data(), lat_nodes * 4, cudaMemcpyHostToDevice), "copy");
    std::memset(h_pinned, 3, copy_bytes);
  }
  const int sms = p->sm_count;
  cudaStream_t st = bench.stream;

  // Shared memory read / write bandwidth: 1024 threads x 2 blocks per SM.
  {
    const int iters = 4096, blocks = sms * 2, threads = 1024;
    const double t = bench.Time([&] { SmemReadKernel<<<blocks, threads, 0, st>>>(iters, d_sink); });
    p->smem_read_bw = 8.0 * iters * blocks * threads / t;
    const double tw = bench.Time([&] { SmemWriteKernel<<<blocks, threads, 0, st>>>(iters, d_sink); });
    p->smem_write_bw = 8.0 * iters * blocks * threads / tw;
  }
  // Global memory: streaming and random reads.
  {
    const int64_t n = big_bytes / 16;
    const double t = bench.Time(
        [&] { CoalescedReadKernel<<<sms * 8, 512, 0, st>>>(static_cast<const uint4*>(d_big), n, d_sink); });
    p->gmem_coalesced_bw = static_cast<double>(big_bytes) / t;
    const int iters = 256, blocks = sms * 8, threads = 512;
    const double tu = bench.Time([&] {
      UncoalescedReadKernel<<<blocks, threads, 0, st>>>(d_rand, static_cast<uint32_t>(l2_floats - 1),
                                                        iters, d_sink);
    });
    p->gmem_uncoalesced_bw = 4.0 * iters * blocks * threads / tu;
  }
  // Latencies (one thread; the launch is amortised over many loads).
  {
    const int iters = 20000;
    const double ts = bench.Time([&] { SmemLatencyKernel<<<1, 32, 0, st>>>(iters, d_sink); }, 3);
    const double tg = bench.Time([&] { GmemLatencyKernel<<<1, 1, 0, st>>>(d_next, iters, d_sink); }, 3);
    const double tl = bench.Time([&] { EmptyKernel<<<1, 32, 0, st>>>(); }, 9);
    p->smem_latency = std::max(1e-10, (ts - tl) / iters);
    p->gmem_latency = std::max(1e-10, (tg - tl) / iters);
  }
  // Launch + completion as the host sees it (launch, synchronize).
  {
    std::vector<double> t;
    for (int i = 0; i < 21 && bench.ok; ++i) {
      const auto start = std::chrono::steady_clock::now();
      EmptyKernel<<<1, 32, 0, st>>>();
      bench.Check(cudaStreamSynchronize(st), "sync");
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(t.begin(), t.end());
    p->launch_seconds = t.empty() ? 0 : t[t.size() / 2];
  }
  // Reductions.
  {
    const int rounds = 64, blocks = sms * 8, threads = 1024;
    const double t = bench.Time([&] { BlockReduceKernel<<<blocks, threads, 0, st>>>(rounds, d_ws); });
    p->block_reduce_rate = t / (static_cast<double>(rounds) * blocks * threads);
    const unsigned grid = static_cast<unsigned>((red_rows + 255) / 256);
    const double tg = bench.Time([&] {
      PartialWriteKernel<<<grid, 256, 0, st>>>(d_ws, red_rows, red_parts);
      PartialReduceKernel<<<grid, 256, 0, st>>>(d_ws, red_rows, red_parts, d_out);
    });
    p->global_reduce_rate = tg / (static_cast<double>(red_rows) * red_parts);
  }
  // Copies (pinned), and host staging into pinned memory.
  {
    const double th = bench.Time(
        [&] { cudaMemcpyAsync(d_big, h_pinned, copy_bytes, cudaMemcpyHostToDevice, st); }, 3);
    const double td = bench.Time(
        [&] { cudaMemcpyAsync(h_pinned, d_big, copy_bytes, cudaMemcpyDeviceToHost, st); }, 3);
    p->h2d_bw = static_cast<double>(copy_bytes) / th;
    p->d2h_bw = static_cast<double>(copy_bytes) / td;
    std::vector<double> t;
    for (int i = 0; i < 9 && bench.ok; ++i) {
      const auto start = std::chrono::steady_clock::now();
      bench.Check(cudaMemcpyAsync(d_big, h_pinned, 4096, cudaMemcpyHostToDevice, st), "copy");
      bench.Check(cudaStreamSynchronize(st), "sync");
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(t.begin(), t.end());
    p->copy_latency = t.empty() ? 0 : t[t.size() / 2];
    std::vector<char> pageable(copy_bytes, 1);
    std::vector<double> tc;
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(h_pinned, pageable.data(), copy_bytes);
      tc.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(tc.begin(), tc.end());
    p->host_copy_bw = static_cast<double>(copy_bytes) / tc[1];
  }
  bench.Check(cudaStreamSynchronize(st), "sync");
  cudaFree(d_big);
  cudaFree(d_rand);
  cudaFree(d_next);
  cudaFree(d_sink);
  cudaFree(d_ws);
  cudaFree(d_out);
  cudaFreeHost(h_pinned);
  cudaEventDestroy(bench.a);
  cudaEventDestroy(bench.b);
  cudaStreamDestroy(bench.stream);
  if (bench.ok && !p->Valid()) {
    *error = "calibration produced invalid parameters";
    return false;
  }
  return bench.ok;
}

}  // namespace grove
