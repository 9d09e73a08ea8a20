#include "bench/common/stats.h"

#include <algorithm>

namespace grove::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace grove::bench
