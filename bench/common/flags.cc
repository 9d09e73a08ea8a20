#include "bench/common/flags.h"

#include <cstdio>
#include <utility>

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
      if (it == flags->counts.end() || !absl::SimpleAtoi(v, &n) ||
          n < (flags->may_be_zero.count(k) ? 0 : 1)) {
        return false;
      }
      it->second = n;
    }
  }
  return argc % 2 == 1 && !flags->model.empty() && !flags->rows.empty();
}

void FlagSet::String(const std::string& name, std::string* field) {
  Custom(name, [field](const std::string& v) {
    *field = v;
    return true;
  });
}

void FlagSet::Int(const std::string& name, int64_t* field) {
  Custom(name, [field](const std::string& v) { return absl::SimpleAtoi(v, field); });
}

void FlagSet::Int(const std::string& name, int* field) {
  Custom(name, [field](const std::string& v) { return absl::SimpleAtoi(v, field); });
}

void FlagSet::Double(const std::string& name, double* field) {
  Custom(name, [field](const std::string& v) { return absl::SimpleAtod(v, field); });
}

void FlagSet::Switch(const std::string& name, bool* field) { switches_[name] = field; }

void FlagSet::Custom(const std::string& name, std::function<bool(const std::string&)> set) {
  valued_[name] = std::move(set);
}

bool FlagSet::Parse(int argc, char** argv) const {
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (auto s = switches_.find(name); s != switches_.end()) {
      *s->second = true;
      continue;
    }
    auto v = valued_.find(name);
    if (v == valued_.end()) {
      std::fprintf(stderr, "unknown flag %s\n", name.c_str());
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", name.c_str());
      return false;
    }
    if (!v->second(argv[++i])) {
      std::fprintf(stderr, "bad value for %s: '%s'\n", name.c_str(), argv[i]);
      return false;
    }
  }
  return true;
}

void AddModelRowsFlags(FlagSet* set, std::string* model, std::string* rows, std::string* name) {
  set->String("--model", model);
  set->String("--rows", rows);
  if (name != nullptr) set->String("--name", name);
}

void AddPredictExplainFlags(FlagSet* set, int64_t* predict_rows, int64_t* explain_rows,
                            std::string* explain_strategy) {
  set->Int("--predict-rows", predict_rows);
  set->Int("--explain-rows", explain_rows);
  set->String("--explain-strategy", explain_strategy);
}

}  // namespace grove::bench
