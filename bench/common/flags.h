// Command lines of the model-and-rows benchmark programs (bench programs only):
//   PROGRAM --model M --rows R.csv [--name LABEL] [--COUNT N]...
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace grove::bench {

struct ModelRowsFlags {
  std::string model, rows, name;
  // "--shap-rows" -> its value; the program puts its defaults in before parsing.
  std::map<std::string, int64_t> counts;

  int64_t count(const std::string& flag) const { return counts.at(flag); }
  // LABEL, or the model path when --name is absent.
  const std::string& label() const { return name.empty() ? model : name; }
};

// Parses "--flag value" pairs into `flags`; false on an unknown flag, a count that is not a positive
// integer, or a missing --model / --rows.
bool ParseModelRowsFlags(int argc, char** argv, ModelRowsFlags* flags);

}  // namespace grove::bench
