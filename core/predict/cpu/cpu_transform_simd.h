// The CPU engine's link functions eight rows at a time with AVX-512 (four at a time with AVX2 and
// FMA where AVX-512 is absent): a block's margins, by column (one column per output, as the walks
// add them), to its transformed predictions. The same operations as TransformRow
// (core/model/transform.h) in the same order, and Exp512 / Exp256 the same operations as HostExp
// (core/model/exp.h): the same bits as the reference, row for row.
#pragma once

#include <cstdint>

#include "core/model/transform.h"

namespace grove::cpu {

// Rows TransformBlock512 takes at a time: one vector of doubles.
inline constexpr int kTransformRows = 8;

// Whether TransformBlock512 takes the link of `p` (identity, sigmoid, exp and softmax; the others
// are left to TransformRow a row at a time).
bool VectorTransformTakes(const TransformParams& p);

// exp of eight doubles: HostExp of each, bit for bit; only where HaveSimdWalk().
void Exp512(const double* x, double* out);

// Rows [0, rows) of a block, rows a multiple of kTransformRows: output k of row r at margins[k * stride + r],
// num_outputs columns. Writes row r's TransformWidth values at out[r * out_stride] (with
// `margin_only`, the margins themselves as floats, whatever the link). Softmax overwrites the
// margins with their exponentials. Only where VectorTransformTakes(p) or margin_only, and only
// where HaveSimdWalk().
void TransformBlock512(const TransformParams& p, bool margin_only, double* margins, int64_t stride,
                       int rows, float* out, int64_t out_stride);

// Whether the processor runs TransformBlock256 (AVX2 and FMA).
bool HaveAvx2Transform();

// exp of four doubles: HostExp of each, bit for bit; only where HaveAvx2Transform().
void Exp256(const double* x, double* out);

// TransformBlock512's contract, four rows to a vector; only where HaveAvx2Transform().
void TransformBlock256(const TransformParams& p, bool margin_only, double* margins, int64_t stride,
                       int rows, float* out, int64_t out_stride);

}  // namespace grove::cpu
