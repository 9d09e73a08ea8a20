#include "core/common/host_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/common/thread_pool.h"

namespace grove {

void CopyRows(ThreadPool* pool, float* dst, int64_t dst_stride, const float* src,
              int64_t src_stride, int64_t rows, int64_t cols) {
  const int64_t row_bytes = cols * 4;
  auto copy = [&](int64_t begin, int64_t end) {
    if (dst_stride == cols && src_stride == cols) {
      std::memcpy(dst + begin * cols, src + begin * cols,
                  static_cast<size_t>((end - begin) * row_bytes));
      return;
    }
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(dst + r * dst_stride, src + r * src_stride, static_cast<size_t>(row_bytes));
    }
  };
  if (pool == nullptr || rows * row_bytes < (int64_t{4} << 20)) {
    copy(0, rows);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, row_bytes));
  pool->ParallelFor(rows, grain, copy);
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
