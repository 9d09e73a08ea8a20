// Summaries of timings for the bench programs.
#pragma once

#include <vector>

namespace grove::bench {

// The median of `v` (the upper one of an even count); 0 for none.
double Median(std::vector<double> v);

}  // namespace grove::bench
