#include "bench/common/flags.h"

#include "absl/strings/numbers.h"

namespace grove::bench {

bool ParseModelRowsFlags(int argc, char** argv, ModelRowsFlags* flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") {
      flags->model = v;
    } else if (k == "--rows") {
      flags->rows = v;
    } else if (k == "--name") {
      flags->name = v;
    } else {
      auto it = flags->counts.find(k);
      int64_t n = 0;
      if (it == flags->counts.end() || !absl::SimpleAtoi(v, &n) || n < 1) return false;
      it->second = n;
    }
  }
  return argc % 2 == 1 && !flags->model.empty() && !flags->rows.empty();
}

}  // namespace grove::bench
