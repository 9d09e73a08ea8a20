#include "core/common/host_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/common/thread_pool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace grove {
namespace {

// memcpy with non-temporal stores for the 16-byte-aligned middle of the destination (the ends,
// and CPUs without SSE2, copy through the cache). The caller fences.
void StreamBytes(char* dst, const char* src, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, (size_t{16} - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + body, src + body, n - body);
#else
  std::memcpy(dst, src, n);
#endif
}

void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// CopyRows and StageRows: `stream` picks the stores.
void CopyRowsWith(bool stream, ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
                  int64_t src_stride, int64_t rows, int64_t cols) {
  const int64_t row_bytes = cols * 4;
  auto bytes = [&](float* d, const float* s, int64_t n) {
    if (stream) {
      StreamBytes(reinterpret_cast<char*>(d), reinterpret_cast<const char*>(s), static_cast<size_t>(n));
    } else {
      std::memcpy(d, s, static_cast<size_t>(n));
    }
  };
  auto copy = [&](int64_t begin, int64_t end) {
    if (dst_stride == cols && src_stride == cols) {
      bytes(dst + begin * cols, src + begin * cols, (end - begin) * row_bytes);
    } else {
      for (int64_t r = begin; r < end; ++r) bytes(dst + r * dst_stride, src + r * src_stride, row_bytes);
    }
    // Each thread's non-temporal stores are ordered before whatever it does next (the pool's
    // completion count, which the caller waits on before issuing the DMA).
    if (stream) StreamFence();
  };
  if (pool == nullptr || rows * row_bytes < (int64_t{4} << 20)) {
    copy(0, rows);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, row_bytes));
  pool->ParallelFor(rows, grain, copy);
}

}  // namespace

void CopyRows(ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
              int64_t src_stride, int64_t rows, int64_t cols) {
  CopyRowsWith(false, pool, dst, dst_stride, src, src_stride, rows, cols);
}

void StageRows(ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
               int64_t src_stride, int64_t rows, int64_t cols) {
  CopyRowsWith(true, pool, dst, dst_stride, src, src_stride, rows, cols);
}

void CopyPieces(ThreadPool* pool, absl::Span<const CopyPiece> pieces) {
  constexpr size_t kParallelBytes = size_t{1} << 20;
  constexpr size_t kSpanBytes = size_t{256} << 10;
  size_t total = 0;
  for (const CopyPiece& p : pieces) total += p.bytes;
  if (pool == nullptr || total < kParallelBytes) {
    for (const CopyPiece& p : pieces) {
      if (p.bytes > 0) std::memcpy(p.dst, p.src, p.bytes);
    }
    return;
  }
  // starts[i]: offset of piece i in the concatenated bytes.
  std::vector<size_t> starts(pieces.size() + 1, 0);
  for (size_t i = 0; i < pieces.size(); ++i) starts[i + 1] = starts[i] + pieces[i].bytes;
  const int64_t spans = static_cast<int64_t>((total + kSpanBytes - 1) / kSpanBytes);
  pool->ParallelFor(spans, 1, [&](int64_t first, int64_t last) {
    const size_t begin = static_cast<size_t>(first) * kSpanBytes;
    const size_t end = std::min(total, static_cast<size_t>(last) * kSpanBytes);
    // The piece holding `begin`: the last start <= begin.
    size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                   starts.begin()) - 1;
    for (size_t at = begin; at < end; ++i) {
      const size_t from = at - starts[i];
      const size_t n = std::min(end, starts[i + 1]) - at;
      if (n > 0) std::memcpy(pieces[i].dst + from, pieces[i].src + from, n);
      at += n;
    }
  });
}

}  // namespace grove
