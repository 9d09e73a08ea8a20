#include "core/model/catboost_hash.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

namespace grove {
namespace {

// The constants of CityHash's description: three odd 64-bit primes and the multiplier of its
// 128-to-64-bit fold.
constexpr uint64_t kP0 = 0xc3a5c85c97cb3127ULL;
constexpr uint64_t kP1 = 0xb492b66fbe98f273ULL;
constexpr uint64_t kP2 = 0x9ae16a3b2f90404fULL;
constexpr uint64_t kP3 = 0xc949d7c7509e6557ULL;
constexpr uint64_t kFoldMul = 0x9ddfea08eb382d69ULL;

// Little-endian loads, as the hash is defined (memcpy: unaligned and alias-safe).
uint64_t Load64(const char* p) {
  unsigned char b[8];
  std::memcpy(b, p, 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
uint64_t Load32(const char* p) {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return uint64_t{b[0]} | uint64_t{b[1]} << 8 | uint64_t{b[2]} << 16 | uint64_t{b[3]} << 24;
}

uint64_t RotR(uint64_t v, int r) { return r == 0 ? v : (v >> r) | (v << (64 - r)); }
uint64_t Mix47(uint64_t v) { return v ^ (v >> 47); }

// Two 64-bit words folded into one (the hash's Hash128to64).
uint64_t Fold(uint64_t lo, uint64_t hi) {
  uint64_t a = (lo ^ hi) * kFoldMul;
  a ^= a >> 47;
  uint64_t b = (hi ^ a) * kFoldMul;
  b ^= b >> 47;
  return b * kFoldMul;
}

uint64_t UpTo16(const char* s, size_t n) {
  if (n > 8) {
    const uint64_t head = Load64(s);
    const uint64_t tail = Load64(s + n - 8);
    // n is in (8, 16]: the rotation is never 0.
    return Fold(head, RotR(tail + n, static_cast<int>(n))) ^ tail;
  }
  if (n >= 4) {
    return Fold(n + (Load32(s) << 3), Load32(s + n - 4));
  }
  if (n > 0) {
    const uint32_t first = static_cast<unsigned char>(s[0]);
    const uint32_t middle = static_cast<unsigned char>(s[n >> 1]);
    const uint32_t last = static_cast<unsigned char>(s[n - 1]);
    const uint32_t y = first + (middle << 8);
    const uint32_t z = static_cast<uint32_t>(n) + (last << 2);
    return Mix47(uint64_t{y} * kP2 ^ uint64_t{z} * kP3) * kP2;
  }
  return kP2;
}

uint64_t From17To32(const char* s, size_t n) {
  const uint64_t a = Load64(s) * kP1;
  const uint64_t b = Load64(s + 8);
  const uint64_t c = Load64(s + n - 8) * kP2;
  const uint64_t d = Load64(s + n - 16) * kP0;
  return Fold(RotR(a - b, 43) + RotR(c, 30) + d, a + RotR(b ^ kP3, 20) - c + n);
}

// One half of the 33..64-byte case: words at o0 (added to `a`), o1, o2, o3 (the last added, its
// sum with `z` is the first result).
struct Pair {
  uint64_t first, second;
};
Pair Quarter(uint64_t a, uint64_t z, uint64_t w1, uint64_t w2) {
  const uint64_t b = RotR(a + z, 52);
  uint64_t c = RotR(a, 37);
  a += w1;
  c += RotR(a, 7);
  a += w2;
  return {a + z, b + RotR(a, 31) + c};
}

uint64_t From33To64(const char* s, size_t n) {
  const Pair v = Quarter(Load64(s) + (n + Load64(s + n - 16)) * kP0, Load64(s + 24),
                         Load64(s + 8), Load64(s + 16));
  const Pair w = Quarter(Load64(s + 16) + Load64(s + n - 32), Load64(s + n - 8),
                         Load64(s + n - 24), Load64(s + n - 16));
  const uint64_t r = Mix47((v.first + w.second) * kP2 + (w.first + v.second) * kP0);
  return Mix47(r * kP0 + v.second) * kP2;
}

// 32 bytes at `s` mixed into the seeds (a, b): the hash's WeakHashLen32WithSeeds.
Pair Mix32(const char* s, uint64_t a, uint64_t b) {
  const uint64_t w = Load64(s), x = Load64(s + 8), y = Load64(s + 16), z = Load64(s + 24);
  a += w;
  b = RotR(b + a + z, 21);
  const uint64_t c = a;
  a += x + y;
  b += RotR(a, 44);
  return {a + z, b + c};
}

uint64_t Over64(const char* s, size_t n) {
  // The last 64 bytes seed the state; the 64-byte blocks from the start (the last one overlapping
  // that tail when n is not a multiple of 64) are then folded in.
  uint64_t x = Load64(s);
  uint64_t y = Load64(s + n - 16) ^ kP1;
  uint64_t z = Load64(s + n - 56) ^ kP0;
  Pair v = Mix32(s + n - 64, n, y);
  Pair w = Mix32(s + n - 32, n * kP1, kP0);
  z += Mix47(v.second) * kP1;
  x = RotR(z + x, 39) * kP1;
  y = RotR(y, 33) * kP1;
  for (size_t left = (n - 1) & ~size_t{63}; left != 0; left -= 64, s += 64) {
    x = RotR(x + y + v.first + Load64(s + 16), 37) * kP1;
    y = RotR(y + v.second + Load64(s + 48), 42) * kP1;
    x ^= w.second;
    y ^= v.first;
    z = RotR(z ^ w.first, 33);
    v = Mix32(s, v.second * kP1, x + w.first);
    w = Mix32(s + 32, z + w.second, y);
    std::swap(z, x);
  }
  return Fold(Fold(v.first, w.first) + Mix47(y) * kP1 + z, Fold(v.second, w.second) + x);
}

constexpr uint64_t kCtrKeyFactor = kCatboostCtrKeyMultiplier * kCatboostCtrKeyMultiplier;

// The inverse of an odd number modulo 2^64 by Newton's iteration x <- x (2 - a x): a is its own
// inverse modulo 8 (3 bits), and every step doubles the bits that are right.
constexpr uint64_t InverseMod64(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
constexpr uint64_t kCtrKeyInverse = InverseMod64(kCtrKeyFactor);
static_assert(kCtrKeyFactor * kCtrKeyInverse == 1, "the CTR key map must be invertible");

}  // namespace

uint64_t CatboostCtrKey(uint32_t category_hash) {
  const int32_t hash = static_cast<int32_t>(category_hash);
  return static_cast<uint64_t>(static_cast<int64_t>(hash)) * kCtrKeyFactor;
}

std::optional<uint32_t> CatboostCategoryOfCtrKey(uint64_t key) {
  const int64_t value = static_cast<int64_t>(key * kCtrKeyInverse);
  if (value < std::numeric_limits<int32_t>::min() ||
      value > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(static_cast<int32_t>(value));
}

uint64_t CityHash64V1(absl::string_view bytes) {
  const char* s = bytes.data();
  const size_t n = bytes.size();
  if (n <= 16) return UpTo16(s, n);
  if (n <= 32) return From17To32(s, n);
  if (n <= 64) return From33To64(s, n);
  return Over64(s, n);
}

}  // namespace grove
