#include "bench/common/copy_bandwidth.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/gpu/device_set.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#endif

namespace grove::bench {

using gpu::VisibleGpuCount;

#if defined(GROVE_HAVE_CUDA)
namespace {

using gpu::DeviceBuffer;
using gpu::PinnedBuffer;

// One device's side of the measure: a pinned host buffer, a device buffer and a stream.
struct Endpoint {
  int device = 0;
  PinnedBuffer host;
  DeviceBuffer dev;
  cudaStream_t stream = nullptr;
  Endpoint() = default;
  Endpoint(Endpoint&& o) noexcept
      : device(o.device),
        host(std::move(o.host)),
        dev(std::move(o.dev)),
        stream(std::exchange(o.stream, nullptr)) {}
  Endpoint(const Endpoint&) = delete;
  ~Endpoint() {
    if (stream != nullptr) {
      (void)cudaSetDevice(device);
      (void)cudaStreamSynchronize(stream);
      (void)cudaStreamDestroy(stream);
    }
  }
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Issues `reps` copies of `bytes` on every endpoint of `ends` (host -> device when `to_device`),
// then waits for all; returns the summed bandwidth in GB/s.
absl::StatusOr<double> Copy(std::vector<Endpoint*>& ends, int64_t bytes, int reps, bool to_device) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    for (Endpoint* e : ends) {
      GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(e->device), "cudaSetDevice");
      GROVE_CUDA_RETURN_IF_ERROR(
          to_device ? cudaMemcpyAsync(e->dev.get(), e->host.get(), bytes, cudaMemcpyHostToDevice,
                                      e->stream)
                    : cudaMemcpyAsync(e->host.get(), e->dev.get(), bytes, cudaMemcpyDeviceToHost,
                                      e->stream),
          "bandwidth copy");
    }
  }
  for (Endpoint* e : ends) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(e->device), "cudaSetDevice");
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(e->stream), "bandwidth copy");
  }
  const double t = Seconds(start);
  return static_cast<double>(bytes) * reps * static_cast<double>(ends.size()) / t / 1e9;
}

}  // namespace
#endif

absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(const std::vector<int>& devices, int64_t bytes,
                                                   int reps) {
  const int visible = VisibleGpuCount();
  if (visible == 0) return absl::FailedPreconditionError("no CUDA device visible");
  if (devices.empty() || bytes <= 0 || reps < 1) {
    return absl::InvalidArgumentError("copy bandwidth: no devices, or bytes or reps not positive");
  }
  for (int d : devices) {
    if (d < 0 || d >= visible) {
      return absl::InvalidArgumentError(
          absl::StrCat("copy bandwidth: device ", d, " is not one of the ", visible, " visible"));
    }
  }
#if defined(GROVE_HAVE_CUDA)
  std::vector<Endpoint> ends(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    Endpoint& e = ends[i];
    e.device = devices[i];
    GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(e.device), "cudaSetDevice");
    absl::StatusOr<PinnedBuffer> host = PinnedBuffer::Allocate(bytes, "bandwidth host buffer");
    if (!host.ok()) return host.status();
    absl::StatusOr<DeviceBuffer> dev = DeviceBuffer::Allocate(bytes, "bandwidth device buffer");
    if (!dev.ok()) return dev.status();
    e.host = *std::move(host);
    e.dev = *std::move(dev);
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking),
                               "cudaStreamCreate");
  }
  CopyBandwidth b;
  std::vector<Endpoint*> all;
  for (Endpoint& e : ends) {
    std::vector<Endpoint*> one = {&e};
    if (absl::StatusOr<double> w = Copy(one, bytes, 1, true); !w.ok()) return w.status();  // warm-up
    absl::StatusOr<double> g = Copy(one, bytes, reps, true);
    if (!g.ok()) return g.status();
    b.to_device.push_back(*g);
    all.push_back(&e);
  }
  absl::StatusOr<double> to_all = Copy(all, bytes, reps, true);
  if (!to_all.ok()) return to_all.status();
  b.to_all = *to_all;
  absl::StatusOr<double> from_all = Copy(all, bytes, reps, false);
  if (!from_all.ok()) return from_all.status();
  b.from_all = *from_all;
  return b;
#else
  return absl::FailedPreconditionError("built without CUDA");
#endif
}

}  // namespace grove::bench
