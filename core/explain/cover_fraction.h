// The share of a node's training rows that went to one child: child cover over node cover, and 0
// under a node of cover 0 (a branch no training row reached), as XGBoost's and LightGBM's TreeSHAP
// take it. Every CPU explanation (the reference TreeSHAP, the path layout, the quadrature tree
// program, Saabas attributions) weighs expected values by it, so they agree on the same bits.
#pragma once

namespace grove {

inline double CoverFraction(double child_cover, double node_cover) {
  return node_cover > 0 ? child_cover / node_cover : 0.0;
}

}  // namespace grove
