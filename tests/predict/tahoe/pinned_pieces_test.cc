#include "core/predict/tahoe/pinned_pieces.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "gtest/gtest.h"

namespace grove {
namespace {

constexpr int64_t kSlot = 1 << 18;  // the host path's staging slot (kTargetChunkRows)

// What every schedule must hold: the pieces cover the call exactly, none is larger than the
// buffer size it states or smaller than half the first, two buffers fit a slot, and the two ends
// (the copy in that nothing overlaps, the kernel and copy out that nothing follows) are at most a
// third of a piece or the minimum piece.
void ExpectValid(const PieceSchedule& s, int64_t rows, int64_t slot_rows) {
  ASSERT_FALSE(s.sizes().empty());
  EXPECT_EQ(std::accumulate(s.sizes().begin(), s.sizes().end(), int64_t{0}), rows);
  EXPECT_LE(2 * s.piece_rows, slot_rows);
  for (int64_t n : s.sizes()) {
    EXPECT_GE(n, s.sizes().front() / 2);  // no launch far below the first piece's size
    EXPECT_LE(n, s.piece_rows);
  }
  const int64_t end = std::max((s.piece_rows + 2) / 3, std::min(kMinPieceRows, s.piece_rows));
  EXPECT_LE(s.sizes().front(), end);
  EXPECT_LE(s.sizes().back(), end);
}

TEST(PinnedPiecesTest, OneMillionRowsOnOneOrTwoGpus) {
  for (int64_t rows : {1000000, 500000}) {
    SCOPED_TRACE(rows);
    const PieceSchedule s = PinnedPieces(rows, kSlot);
    ExpectValid(s, rows, kSlot);
    EXPECT_EQ(s.piece_rows, std::min((rows + 5) / 6, kSlot / 2));  // a sixth, at most half a slot
    // Ramp up by doubling from a third of a piece, ramp down by halves: a handful of pieces, not
    // hundreds of launches.
    EXPECT_EQ(s.sizes()[0] * 2, s.sizes()[1]);
    EXPECT_LE(s.sizes().size(), 12u);
  }
}

TEST(PinnedPiecesTest, PiecesStopAtHalfASlotAndCallsAboveFourSlotsTakeNone) {
  const int64_t rows = kMaxPieceSlots * kSlot;
  const PieceSchedule s = PinnedPieces(rows, kSlot);
  ExpectValid(s, rows, kSlot);
  EXPECT_EQ(s.piece_rows, kSlot / 2);
  EXPECT_TRUE(PinnedPieces(rows + 1, kSlot).sizes().empty());
  EXPECT_TRUE(PinnedPieces(40000000, kSlot).sizes().empty());
}

TEST(PinnedPiecesTest, SmallCallsAndSmallSlotsTakeNoPieces) {
  EXPECT_TRUE(PinnedPieces(6 * kMinPieceRows - 1, kSlot).sizes().empty());
  EXPECT_FALSE(PinnedPieces(6 * kMinPieceRows, kSlot).sizes().empty());
  EXPECT_TRUE(PinnedPieces(100000, 7).sizes().empty());  // slots of fewer than eight rows
  EXPECT_TRUE(PinnedPieces(0, kSlot).sizes().empty());
}

// Slots smaller than the minimum piece allows (an engine told to keep chunks small) still pipeline,
// with pieces of an eighth of a slot at least.
TEST(PinnedPiecesTest, SmallSlotsCutIntoEighths) {
  const PieceSchedule s = PinnedPieces(3001, 997);
  ExpectValid(s, 3001, 997);
  EXPECT_EQ(s.piece_rows, 997 / 2);
  EXPECT_GE(s.sizes().front(), 997 / 8 / 4);
}

// Every call size between six minimum pieces and four slots takes pieces (never more than
// kMaxPieces of them), and a valid schedule; every other size none.
TEST(PinnedPiecesTest, EveryCallSizeIsCovered) {
  for (int64_t slot : {int64_t{64}, int64_t{997}, int64_t{1} << 16, kSlot}) {
    const int64_t least = std::min(kMinPieceRows, slot / 8);
    for (int64_t rows = 1; rows < 3000000; rows = rows * 21 / 20 + 1) {
      const PieceSchedule s = PinnedPieces(rows, slot);
      SCOPED_TRACE(::testing::Message() << rows << " rows, slot " << slot);
      if (rows < 6 * least || rows > kMaxPieceSlots * slot) {
        EXPECT_TRUE(s.sizes().empty());
        continue;
      }
      ExpectValid(s, rows, slot);
    }
  }
}

}  // namespace
}  // namespace grove
