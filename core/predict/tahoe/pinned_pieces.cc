#include "core/predict/tahoe/pinned_pieces.h"

#include <algorithm>

namespace grove {

PieceSchedule PinnedPieces(int64_t rows, int64_t slot_rows) {
  PieceSchedule s;
  // A full piece: a sixth of the call (so that the ends are a small part of it), at most half a
  // slot (two buffers per slot at least: a piece's copy in overlaps the previous one's kernel on
  // the same slot) and at least kMinPieceRows (shorter launches run far below the large-batch
  // rate), or slot_rows / 8 where slots are smaller than that allows.
  const int64_t floor_rows = std::min(kMinPieceRows, slot_rows / 8);
  if (floor_rows < 1 || rows < 6 * floor_rows) return s;
  // Calls of more than kMaxPieceSlots slots' rows take whole chunks: their ends are a small part
  // of them, and pieces of half a slot are twice the launches and copies, which cost more than
  // they save where several GPUs' threads queue at once.
  if (rows > kMaxPieceSlots * slot_rows) return s;
  const int64_t full = std::clamp((rows + 5) / 6, floor_rows, slot_rows / 2);
  // The least piece (the first one; the end halves down to it): a third of a piece, but not below
  // the minimum piece (launches of a few thousand rows cost more than the copies they would
  // overlap).
  const int64_t least = std::max(full / 3, floor_rows);
  int64_t left = rows, next = least;
  while (left > 0) {
    int64_t n;
    if (left <= 2 * full) {
      // The end: half of what is left each time down to the least piece, so the last kernel and
      // copy out are short.
      n = left <= least ? left : left <= 2 * least ? left - left / 2 : std::min(full, left / 2);
    } else {
      n = std::min(next, full);  // the start: doubling from the least piece
      next = std::min(full, next * 2);
    }
    n = std::min(n, left);
    if (s.count == kMaxPieces) return PieceSchedule{};  // not reached (a test sweeps the sizes)
    s.rows[s.count++] = n;
    s.piece_rows = std::max(s.piece_rows, n);
    left -= n;
  }
  return s;
}

}  // namespace grove
