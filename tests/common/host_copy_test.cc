#include "core/common/host_copy.h"

#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "core/common/thread_pool.h"

namespace grove {
namespace {

// Pieces of random sizes (empty ones included) gathered from one buffer into another: the pool's
// split into spans across piece boundaries copies exactly what the serial loop copies.
TEST(CopyPieces, ParallelSpansCopyEveryPieceExactly) {
  ThreadPool pool(4);
  std::mt19937 rng(7);
  for (size_t total_target : {size_t{1000}, size_t{3} << 20, (size_t{5} << 20) + 13}) {
    std::vector<char> src(total_target);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(rng());
    // Pieces cover src in order with random sizes; destination order is reversed piece by piece.
    std::vector<size_t> sizes;
    for (size_t at = 0; at < src.size();) {
      size_t n = std::min(src.size() - at, static_cast<size_t>(rng() % 700000));
      if (rng() % 5 == 0) n = 0;
      sizes.push_back(n);
      at += n;
    }
    std::vector<char> serial(src.size(), 0), parallel(src.size(), 0);
    auto pieces_into = [&](std::vector<char>& dst) {
      std::vector<CopyPiece> pieces;
      size_t from = 0, to = dst.size();
      for (size_t n : sizes) {
        to -= n;
        pieces.push_back(CopyPiece{dst.data() + to, src.data() + from, n});
        from += n;
      }
      return pieces;
    };
    CopyPieces(nullptr, pieces_into(serial));
    CopyPieces(&pool, pieces_into(parallel));
    EXPECT_EQ(serial, parallel) << total_target;
    // And the serial result is the pieces in reverse order.
    size_t from = 0, to = src.size();
    for (size_t n : sizes) {
      to -= n;
      ASSERT_TRUE(std::equal(src.begin() + from, src.begin() + from + n, serial.begin() + to));
      from += n;
    }
  }
}

// Rows copied with streaming stores (StageRows) land exactly where CopyRows puts them, for
// destinations at every offset from a 16-byte boundary, rows of lengths that leave every possible
// remainder, strided and packed rows, on the calling thread and split over a pool; the floats
// around the destination rows are left alone.
TEST(StageRows, CopiesExactlyWhatCopyRowsCopies) {
  ThreadPool pool(3);
  std::mt19937 rng(11);
  struct Shape {
    int64_t rows, cols, src_stride, dst_stride;
  };
  const Shape shapes[] = {{1, 1, 1, 1},         {7, 3, 3, 3},          {5, 17, 20, 17},
                          {33, 16, 16, 19},     {300, 8, 8, 8},        {4100, 257, 257, 257},
                          {5000, 256, 260, 256}, {70000, 16, 16, 16}};
  for (const Shape& sh : shapes) {
    std::vector<float> src(sh.rows * sh.src_stride);
    for (float& v : src) v = static_cast<float>(rng() % 100000) * 0.5f;
    for (int misalign = 0; misalign < 4; ++misalign) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const size_t n = sh.rows * sh.dst_stride + 8;
        std::vector<float> want(n, -1.0f), got(n, -1.0f);
        CopyRows(p, want.data() + misalign, sh.dst_stride, src.data(), sh.src_stride, sh.rows, sh.cols);
        StageRows(p, got.data() + misalign, sh.dst_stride, src.data(), sh.src_stride, sh.rows, sh.cols);
        ASSERT_EQ(want, got) << sh.rows << "x" << sh.cols << " misalign " << misalign
                             << (p ? " pool" : " serial");
        EXPECT_EQ(got[misalign + (sh.rows - 1) * sh.dst_stride + sh.cols - 1],
                  src[(sh.rows - 1) * sh.src_stride + sh.cols - 1]);
        for (int i = 0; i < misalign; ++i) EXPECT_EQ(got[i], -1.0f);
      }
    }
  }
}

TEST(CopyPieces, NothingToCopy) {
  ThreadPool pool(2);
  CopyPieces(&pool, {});
  char a = 'a', b = 'b';
  const CopyPiece empty{&a, &b, 0};
  CopyPieces(&pool, {&empty, 1});
  EXPECT_EQ(a, 'a');
}

}  // namespace
}  // namespace grove
