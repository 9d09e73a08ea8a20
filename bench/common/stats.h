// Timings and their summaries for the bench programs.
#pragma once

#include <chrono>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

namespace grove::bench {

// The median of `v` (the upper one of an even count); 0 for none.
double Median(std::vector<double> v);

// Seconds on the steady clock (differences only mean something).
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median wall time in seconds of `reps` calls of `fn`, after one warm-up call that is not
// timed. `fn` returns void, or bool when it can fail: a false from any call (the warm-up's too)
// answers NaN at once. A template so that the timed call is `fn` itself, not a std::function.
template <typename Fn>
double TimeMedian(int reps, Fn&& fn) {
  auto call = [&fn] {
    if constexpr (std::is_same_v<std::invoke_result_t<Fn&>, bool>) {
      return fn();
    } else {
      fn();
      return true;
    }
  };
  if (!call()) return NAN;
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double start = Now();
    if (!call()) return NAN;
    t.push_back(Now() - start);
  }
  return Median(std::move(t));
}

}  // namespace grove::bench
