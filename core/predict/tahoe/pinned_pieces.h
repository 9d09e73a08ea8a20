// PinnedPieces: how a GPU's share of a call whose rows and results are both page-locked is cut into
// pieces that stream through the device (TahoeEngineImpl::RunPinnedPieces).
//
// Why: with rows and results reached by DMA, a call's time on one GPU is its copies and kernels
// overlapped, plus what nothing overlaps: the first piece's copy in and the last piece's kernel and
// copy out. With whole staging chunks those ends are a quarter-million rows' copy and kernel each,
// the same on every GPU whatever the call's share, so they cap what a second GPU adds to a call of
// a million rows. Pieces ramp up from a third of the full piece and back down at the end, so the
// two ends are short while the middle pieces stay large enough for the kernels to run near their
// large-batch rate, and few enough that queueing them (six or seven driver calls each) keeps ahead
// of the device.
//
// Pure function of its arguments; thread-safe.
#pragma once

#include <array>
#include <cstdint>

#include "absl/types/span.h"

namespace grove {

// The full and the first pieces have at least this many rows (an eighth of a slot where slots are
// smaller); the end's halves, at least half the first piece's.
inline constexpr int64_t kMinPieceRows = 16384;
// Calls of more slots' rows than this take whole chunks (PinnedPieces).
inline constexpr int64_t kMaxPieceSlots = 4;
// Piece buffers a staging lane keeps (each slot's buffers cut into at most half this many).
inline constexpr int kMaxPieceBuffers = 16;

// Pieces of one call at most: the ramps and at most eight full pieces fit well within it.
inline constexpr int kMaxPieces = 32;

// Held by value (no allocation per call).
struct PieceSchedule {
  int64_t piece_rows = 0;  // the largest piece (every piece buffer holds this many rows)
  std::array<int64_t, kMaxPieces> rows{};
  int count = 0;
  // Rows of each piece, in order; they add up to the call's rows.
  absl::Span<const int64_t> sizes() const { return {rows.data(), static_cast<size_t>(count)}; }
};

// The pieces of `rows` rows for slots of `slot_rows` rows each (two slots: the buffers are the
// slots' memory, cut into pieces of piece_rows). Empty `sizes` when pieces do not pay: fewer than
// six minimum pieces' rows, more than kMaxPieceSlots slots' rows, or slots of fewer than eight
// rows.
PieceSchedule PinnedPieces(int64_t rows, int64_t slot_rows);

}  // namespace grove
