// NumPy .npy arrays (numpy.save), read from bytes the caller holds: the binary form of a data set
// (a model's background, core/registry/background.h) beside the CSV text of core/io/csv.h.
//
// Accepted: format versions 1.0, 2.0 and 3.0; dtypes '<f4', '<f8', '|i1', '<i2', '<i4', '<i8',
// '|u1', '<u2', '<u4', '<u8' (little-endian floats and integers, as numpy writes them on every
// common machine) and '|b1' (bool: 1 / 0); C or Fortran
// order (pandas' DataFrame.values is often Fortran-ordered: it is transposed on reading); any number
// of dimensions. The header must be the dict numpy writes ('descr', 'fortran_order', 'shape', each
// once, nothing else) and the data exactly the bytes the shape needs. Everything else -- big-endian,
// object or structured dtypes, pickles, truncated or trailing data, a shape whose product overflows
// or exceeds the caller's bound -- is INVALID_ARGUMENT "<source>: <what>", and nothing is allocated
// before the size is known to be within the bound.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace grove {

struct NpyArray {
  std::vector<int64_t> shape;  // numpy's shape; () is a scalar (one value)
  std::vector<double> values;  // C (row-major) order whatever the file's order
};

// Parses a whole .npy file held in `bytes`; `source` names it in errors. At most `max_values`
// values (the product of the shape).
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view source,
                                  int64_t max_values);

}  // namespace grove
