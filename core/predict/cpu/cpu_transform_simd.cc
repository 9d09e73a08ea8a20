#include "core/predict/cpu/cpu_transform_simd.h"

#include <immintrin.h>

#include "core/model/exp.h"

namespace grove::cpu {
namespace {

// HostExp's steps, eight lanes at a time (the clamp by max and min: the same values for every
// number; a NaN lane takes x + x at the end, as HostExp returns it).
__attribute__((target("avx512f"))) inline __m512d Exp8(__m512d x) {
  using namespace exp_internal;
  const __mmask8 nan = _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q);
  const __m512d xc =
      _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(kMinX)), _mm512_set1_pd(kMaxX));
  // The current rounding direction, as HostExp's nearbyint.
  const __m512d kd = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(kLog2e)),
                                          _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(kLn2Hi), xc);  // fma(-kd, hi, xc)
  r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(kLn2Lo), r);
  __m512d p = _mm512_set1_pd(kTaylor[0]);
  for (int i = 1; i < kTerms; ++i) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(kTaylor[i]));
  const __m256i k = _mm512_cvtpd_epi32(kd);  // kd is an integer: exact
  const __m256i k1 = _mm256_srai_epi32(k, 1);
  const __m256i k2 = _mm256_sub_epi32(k, k1);
  const __m256i bias = _mm256_set1_epi32(1023);
  const __m512d s1 = _mm512_castsi512_pd(
      _mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm256_add_epi32(k1, bias)), 52));
  const __m512d s2 = _mm512_castsi512_pd(
      _mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm256_add_epi32(k2, bias)), 52));
  const __m512d e = _mm512_mul_pd(_mm512_mul_pd(p, s1), s2);
  return _mm512_mask_add_pd(e, nan, x, x);
}

// TransformRow's v of eight rows: the margin, divided by the average divisor where averaging.
__attribute__((target("avx512f"))) inline __m512d Value8(const double* m, bool average,
                                                         __m512d divisor) {
  const __m512d v = _mm512_loadu_pd(m);
  return average ? _mm512_div_pd(v, divisor) : v;
}

// Eight rows' floats into column k of their output rows: one store where a row holds one value.
__attribute__((target("avx512f"))) inline void Store8(__m512d v, float* out, int64_t out_stride) {
  const __m256 f = _mm512_cvtpd_ps(v);
  if (out_stride == 1) {
    _mm256_storeu_ps(out, f);
    return;
  }
  alignas(32) float lanes[kTransformRows];
  _mm256_store_ps(lanes, f);
  for (int i = 0; i < kTransformRows; ++i) out[i * out_stride] = lanes[i];
}

// HostExp's steps four lanes at a time with AVX2 and FMA: Exp8's operations on half the lanes.
__attribute__((target("avx2,fma"))) inline __m256d Exp4(__m256d x) {
  using namespace exp_internal;
  const __m256d nan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
  const __m256d xc =
      _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(kMinX)), _mm256_set1_pd(kMaxX));
  const __m256d kd =
      _mm256_round_pd(_mm256_mul_pd(xc, _mm256_set1_pd(kLog2e)), _MM_FROUND_CUR_DIRECTION);
  __m256d r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(kLn2Hi), xc);
  r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(kLn2Lo), r);
  __m256d p = _mm256_set1_pd(kTaylor[0]);
  for (int i = 1; i < kTerms; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kTaylor[i]));
  const __m128i k = _mm256_cvtpd_epi32(kd);  // kd is an integer: exact
  const __m128i k1 = _mm_srai_epi32(k, 1);
  const __m128i k2 = _mm_sub_epi32(k, k1);
  const __m128i bias = _mm_set1_epi32(1023);
  const __m256d s1 = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_add_epi32(k1, bias)), 52));
  const __m256d s2 = _mm256_castsi256_pd(
      _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_add_epi32(k2, bias)), 52));
  const __m256d e = _mm256_mul_pd(_mm256_mul_pd(p, s1), s2);
  return _mm256_blendv_pd(e, _mm256_add_pd(x, x), nan);
}

// Value8 and Store8 on four rows.
__attribute__((target("avx2,fma"))) inline __m256d Value4(const double* m, bool average,
                                                          __m256d divisor) {
  const __m256d v = _mm256_loadu_pd(m);
  return average ? _mm256_div_pd(v, divisor) : v;
}
__attribute__((target("avx2,fma"))) inline void Store4(__m256d v, float* out,
                                                       int64_t out_stride) {
  const __m128 f = _mm256_cvtpd_ps(v);
  if (out_stride == 1) {
    _mm_storeu_ps(out, f);
    return;
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, f);
  for (int i = 0; i < 4; ++i) out[i * out_stride] = lanes[i];
}

}  // namespace

bool HaveAvx2Transform() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) void Exp256(const double* x, double* out) {
  _mm256_storeu_pd(out, Exp4(_mm256_loadu_pd(x)));
}

// TransformBlock512's loop four rows at a time (kTransformRows a multiple of four).
__attribute__((target("avx2,fma"))) void TransformBlock256(const TransformParams& p,
                                                          bool margin_only, double* margins,
                                                          int64_t stride, int rows, float* out,
                                                          int64_t out_stride) {
  static_assert(kTransformRows % 4 == 0, "whole AVX2 vectors of rows");
  const int k_out = p.num_outputs;
  const bool average = p.average_divisor != 1.0;
  const __m256d divisor = _mm256_set1_pd(p.average_divisor);
  for (int r = 0; r < rows; r += 4) {
    float* o = out + r * out_stride;
    const double* m = margins + r;
    if (margin_only || p.link == Link::kIdentity) {
      for (int k = 0; k < k_out; ++k) {
        const __m256d v = margin_only ? _mm256_loadu_pd(m + k * stride)
                                      : Value4(m + k * stride, average, divisor);
        Store4(v, o + k, out_stride);
      }
      continue;
    }
    if (p.link == Link::kSoftmax) {
      __m256d max_value = Value4(m, average, divisor);
      for (int k = 1; k < k_out; ++k) {
        const __m256d v = Value4(m + k * stride, average, divisor);
        max_value = _mm256_blendv_pd(max_value, v, _mm256_cmp_pd(v, max_value, _CMP_GT_OQ));
      }
      __m256d sum = _mm256_setzero_pd();
      for (int k = 0; k < k_out; ++k) {
        const __m256d e = Exp4(_mm256_sub_pd(Value4(m + k * stride, average, divisor), max_value));
        _mm256_storeu_pd(margins + k * stride + r, e);
        sum = _mm256_add_pd(sum, e);
      }
      for (int k = 0; k < k_out; ++k) {
        Store4(_mm256_div_pd(_mm256_loadu_pd(m + k * stride), sum), o + k, out_stride);
      }
      continue;
    }
    for (int k = 0; k < k_out; ++k) {
      const __m256d v = Value4(m + k * stride, average, divisor);
      __m256d y;
      if (p.link == Link::kSigmoid) {
        const __m256d e = Exp4(_mm256_mul_pd(_mm256_set1_pd(-p.sigmoid_alpha), v));
        y = _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_add_pd(_mm256_set1_pd(1.0), e));
      } else {
        y = Exp4(v);
      }
      Store4(y, o + k, out_stride);
    }
  }
}

bool VectorTransformTakes(const TransformParams& p) {
  return p.link == Link::kIdentity || p.link == Link::kSigmoid || p.link == Link::kExp ||
         p.link == Link::kSoftmax;
}

__attribute__((target("avx512f"))) void Exp512(const double* x, double* out) {
  _mm512_storeu_pd(out, Exp8(_mm512_loadu_pd(x)));
}

__attribute__((target("avx512f"))) void TransformBlock512(const TransformParams& p,
                                                          bool margin_only, double* margins,
                                                          int64_t stride, int rows, float* out,
                                                          int64_t out_stride) {
  const int k_out = p.num_outputs;
  const bool average = p.average_divisor != 1.0;
  const __m512d divisor = _mm512_set1_pd(p.average_divisor);
  for (int r = 0; r < rows; r += kTransformRows) {
    float* o = out + r * out_stride;
    const double* m = margins + r;
    if (margin_only || p.link == Link::kIdentity) {
      for (int k = 0; k < k_out; ++k) {
        const __m512d v = margin_only ? _mm512_loadu_pd(m + k * stride)
                                      : Value8(m + k * stride, average, divisor);
        Store8(v, o + k, out_stride);
      }
      continue;
    }
    if (p.link == Link::kSoftmax) {
      __m512d max_value = Value8(m, average, divisor);
      for (int k = 1; k < k_out; ++k) {
        const __m512d v = Value8(m + k * stride, average, divisor);
        max_value = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(v, max_value, _CMP_GT_OQ),
                                         max_value, v);
      }
      __m512d sum = _mm512_setzero_pd();
      for (int k = 0; k < k_out; ++k) {
        const __m512d e = Exp8(_mm512_sub_pd(Value8(m + k * stride, average, divisor), max_value));
        _mm512_storeu_pd(margins + k * stride + r, e);
        sum = _mm512_add_pd(sum, e);
      }
      for (int k = 0; k < k_out; ++k) {
        Store8(_mm512_div_pd(_mm512_loadu_pd(m + k * stride), sum), o + k, out_stride);
      }
      continue;
    }
    for (int k = 0; k < k_out; ++k) {
      const __m512d v = Value8(m + k * stride, average, divisor);
      __m512d y;
      if (p.link == Link::kSigmoid) {
        // T(1) / (T(1) + Exp(-alpha * m)): -alpha times m, as TransformScalar's product.
        const __m512d e = Exp8(_mm512_mul_pd(_mm512_set1_pd(-p.sigmoid_alpha), v));
        y = _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_add_pd(_mm512_set1_pd(1.0), e));
      } else {
        y = Exp8(v);
      }
      Store8(y, o + k, out_stride);
    }
  }
}

}  // namespace grove::cpu
