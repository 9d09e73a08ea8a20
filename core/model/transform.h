// Link functions: one row of margins -> the transformed prediction, written once (GROVE_HD) for the
// CPU reference and the GPU kernels.
//
// Contract: TransformRow reads TransformParams::num_outputs margins and writes TransformWidth()
// values (1 for kArgmax, num_outputs otherwise). `out` may alias `margin` (every margin is read
// before or at the position it is written). Computes in the margin's type T; the CPU reference uses
// double and rounds once to float when storing.
//
// Library conventions reproduced here:
//  * sigmoid: 1 / (1 + exp(-alpha * m)) per output (XGBoost binary:logistic alpha = 1, LightGBM
//    "binary sigmoid:alpha");
//  * softmax: over the outputs of a row, computed as exp(m - max) / sum (stable; equal to the
//    libraries' result up to rounding);
//  * exp: poisson / gamma / tweedie / cox; log1p(exp(m)): LightGBM cross_entropy_lambda (computed
//    without overflow as m + log1p(exp(-m)) for m > 0);
//  * signed square: LightGBM reg_sqrt, sign(m) * m^2;
//  * hinge: XGBoost binary:hinge, m > 0 ? 1 : 0;
//  * argmax: XGBoost multi:softmax, the index of the first largest margin;
//  * LightGBM average_output (boosting=rf): the margin is divided by the number of iterations used
//    before the link (the raw score itself is not averaged, as in LightGBM).
#pragma once

#include <math.h>

#include "core/common/hd.h"
#include "core/model/exp.h"
#include "core/model/forest.h"

namespace grove {

// Everything the link needs, by value (a kernel argument). Built on the host by
// MakeTransformParams.
struct TransformParams {
  Link link = Link::kIdentity;
  int num_outputs = 1;
  double sigmoid_alpha = 1.0;
  double average_divisor = 1.0;  // margins are divided by this first; 1 when not averaging
};

// `iterations_in_range`: boosting rounds summed into the margin (the average_output divisor).
inline TransformParams MakeTransformParams(const Forest& forest, int iterations_in_range) {
  TransformParams p;
  p.link = forest.objective.link;
  p.num_outputs = forest.num_outputs;
  p.sigmoid_alpha = forest.objective.sigmoid_alpha;
  if (forest.objective.average_output && iterations_in_range > 0) {
    p.average_divisor = static_cast<double>(iterations_in_range);
  }
  return p;
}

GROVE_HD int TransformWidth(const TransformParams& p) {
  return p.link == Link::kArgmax ? 1 : p.num_outputs;
}

namespace transform_internal {
// On the host, HostExp (core/model/exp.h): the bits the CPU engine's vector form also gives.
GROVE_HD double Exp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return HostExp(x);
#endif
}
GROVE_HD float Exp(float x) { return ::expf(x); }
GROVE_HD double Log1p(double x) { return ::log1p(x); }
GROVE_HD float Log1p(float x) { return ::log1pf(x); }

// The largest of a row's margins (each divided by the average divisor first): softmax's shift.
template <typename T>
GROVE_HD T LargestMargin(const TransformParams& p, const T* margin) {
  const T divisor = static_cast<T>(p.average_divisor);
  const bool average = p.average_divisor != 1.0;
  T max_value = average ? margin[0] / divisor : margin[0];
  for (int k = 1; k < p.num_outputs; ++k) {
    const T v = average ? margin[k] / divisor : margin[k];
    if (v > max_value) max_value = v;
  }
  return max_value;
}
}  // namespace transform_internal

// Link of one scalar margin (every link but softmax and argmax, which need the whole row).
template <typename T>
GROVE_HD T TransformScalar(const TransformParams& p, T m) {
  using transform_internal::Exp;
  using transform_internal::Log1p;
  switch (p.link) {
    case Link::kSigmoid:
      return T(1) / (T(1) + Exp(-static_cast<T>(p.sigmoid_alpha) * m));
    case Link::kExp:
      return Exp(m);
    case Link::kLog1pExp:
      return m > T(0) ? m + Log1p(Exp(-m)) : Log1p(Exp(m));
    case Link::kSignedSquare:
      return m < T(0) ? -m * m : m * m;
    case Link::kHinge:
      return m > T(0) ? T(1) : T(0);
    default:
      return m;  // identity (softmax/argmax are handled by TransformRow)
  }
}

// margin: num_outputs values; out: TransformWidth(p) values.
template <typename T, typename OutT>
GROVE_HD void TransformRow(const TransformParams& p, const T* margin, OutT* out) {
  const T divisor = static_cast<T>(p.average_divisor);
  const bool average = p.average_divisor != 1.0;
  if (p.link == Link::kArgmax) {
    int best = 0;
    T best_value = average ? margin[0] / divisor : margin[0];
    for (int k = 1; k < p.num_outputs; ++k) {
      const T v = average ? margin[k] / divisor : margin[k];
      if (v > best_value) {  // first of equal maxima, as std::max_element
        best = k;
        best_value = v;
      }
    }
    out[0] = static_cast<OutT>(best);
    return;
  }
  if (p.link == Link::kSoftmax) {
    const T max_value = transform_internal::LargestMargin(p, margin);
    T sum = T(0);
    // Two passes over exp so that `out` may alias `margin` even when OutT is narrower than T.
    for (int k = 0; k < p.num_outputs; ++k) {
      const T v = average ? margin[k] / divisor : margin[k];
      sum += transform_internal::Exp(v - max_value);
    }
    for (int k = 0; k < p.num_outputs; ++k) {
      const T v = average ? margin[k] / divisor : margin[k];
      out[k] = static_cast<OutT>(transform_internal::Exp(v - max_value) / sum);
    }
    return;
  }
  for (int k = 0; k < p.num_outputs; ++k) {
    const T v = average ? margin[k] / divisor : margin[k];
    out[k] = static_cast<OutT>(TransformScalar(p, v));
  }
}

// TransformRow where `out` does not alias `margin`, with `scratch` (num_outputs values of T) for
// softmax's exponentials, each computed once: the same values, bit for bit.
template <typename T, typename OutT>
GROVE_HD void TransformRow(const TransformParams& p, const T* margin, OutT* out, T* scratch) {
  if (p.link != Link::kSoftmax) {
    TransformRow(p, margin, out);
    return;
  }
  const T divisor = static_cast<T>(p.average_divisor);
  const bool average = p.average_divisor != 1.0;
  const T max_value = transform_internal::LargestMargin(p, margin);
  T sum = T(0);
  for (int k = 0; k < p.num_outputs; ++k) {
    const T v = average ? margin[k] / divisor : margin[k];
    scratch[k] = transform_internal::Exp(v - max_value);
    sum += scratch[k];
  }
  for (int k = 0; k < p.num_outputs; ++k) out[k] = static_cast<OutT>(scratch[k] / sum);
}

}  // namespace grove
