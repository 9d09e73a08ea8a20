// PinnedPieces: how a GPU's share of a call whose rows and results are both page-locked is cut into
// pieces that stream through the device (TahoeEngineImpl::RunPinnedPieces).
//
// Why: with rows and results reached by DMA, a call's time on one GPU is its copies and kernels
// overlapped, plus what nothing overlaps: the first piece's copy in and the last piece's kernel and
// copy out. Whole staging chunks (a quarter-million rows) made that about 0.2 ms per call, which
// held two GPUs to ~1.55x one on 1M-row calls (docs/benchmarks/multi-gpu.md). Pieces ramp up from a
// third of the full piece and back down at the end, so the two ends are short while the middle
// pieces stay large enough for the kernels to run near their large-batch rate, and few enough that
// queueing them (six to eight driver calls each) keeps ahead of the device.
//
// Pure function of its arguments; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace grove {

// A piece has at least this many rows (unless the slots are smaller: then an eighth of a slot).
inline constexpr int64_t kMinPieceRows = 16384;
// Calls of more slots' rows than this take whole chunks (PinnedPieces).
inline constexpr int64_t kMaxPieceSlots = 4;
// Piece buffers a staging lane keeps (each slot's buffers cut into at most half this many).
inline constexpr int kMaxPieceBuffers = 16;

struct PieceSchedule {
  int64_t piece_rows = 0;        // the largest piece (every piece buffer holds this many rows)
  std::vector<int64_t> sizes;    // rows of each piece, in order; they add up to the call's rows
};

// The pieces of `rows` rows for slots of `slot_rows` rows each (two slots: the buffers are the
// slots' memory, cut into pieces of piece_rows). Empty `sizes` when pieces do not pay: fewer than
// six minimum pieces' rows, more than kMaxPieceSlots slots' rows, or slots of fewer than eight
// rows.
PieceSchedule PinnedPieces(int64_t rows, int64_t slot_rows);

}  // namespace grove
