#include "core/common/host_copy.h"

#include <algorithm>
#include <cstring>

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

}  // namespace grove
