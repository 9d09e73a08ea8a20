// Copies of rows between host buffers on the way to and from a GPU (pageable user buffers <->
// pinned staging). One thread copies at 5-10 GB/s, below the PCIe rate that wide rows and wide
// outputs (SHAP values of a 10-class, 784-feature model: 31 KB per row) could reach, so large
// copies are split over a thread pool.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace grove {

class ThreadPool;

// Copies `rows` rows of `cols` floats from `src` (rows `src_stride` floats apart) to `dst`
// (`dst_stride` apart). Copies of 4 MiB or more run on `pool` in pieces of about 1 MiB (the call
// blocks until all are done); smaller ones, or any with a null pool, on the calling thread.
// Thread-safe for disjoint destinations.
void CopyRows(ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
              int64_t src_stride, int64_t rows, int64_t cols);

// CopyRows for a destination that this process's CPUs will not read again (rows staged in pinned
// memory for a GPU's DMA): the stores bypass the caches (non-temporal, where the CPU has them), so
// a staged byte costs the host's memory one read and one write instead of a read, a read for
// ownership and a write, and the staging does not evict the caller's working set. The stores are
// fenced before the call returns (a DMA issued afterwards reads them). Same splitting and thread
// safety as CopyRows.
void StageRows(ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
               int64_t src_stride, int64_t rows, int64_t cols);

// One contiguous piece of a gather or scatter: `bytes` from `src` to `dst`.
struct CopyPiece {
  char* dst;
  const char* src;
  size_t bytes;
};

// Copies every piece (destinations disjoint). From 1 MiB in all, the bytes are split into spans of
// about 256 KiB across piece boundaries and copied on `pool` (the call blocks until all are done;
// the caller copies too); below that, or with a null pool, on the calling thread. Thread-safe.
void CopyPieces(ThreadPool* pool, absl::Span<const CopyPiece> pieces);

}  // namespace grove
