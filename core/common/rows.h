// Non-owning views of dense row-major matrices, the only row format the engines take.
//
// Rows are float32, row-major, NaN = missing value (the format gRPC callers send and the GPU reads).
// Views do not own memory; the caller keeps the buffer alive for the duration of the call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/hd.h"

namespace grove {

template <typename T>
struct MatrixView {
  T* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // Elements between the starts of consecutive rows (>= cols).
  int64_t stride = 0;

  GROVE_HD T* Row(int64_t r) const { return data + r * stride; }
  GROVE_HD T& At(int64_t r, int64_t c) const { return data[r * stride + c]; }
  int64_t size() const { return rows * cols; }
};

using RowsView = MatrixView<const float>;

inline RowsView MakeRowsView(const float* data, int64_t rows, int64_t cols) {
  return RowsView{data, rows, cols, cols};
}

template <typename T>
MatrixView<T> MakeMatrixView(T* data, int64_t rows, int64_t cols) {
  return MatrixView<T>{data, rows, cols, cols};
}

}  // namespace grove
