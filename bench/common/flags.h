// Command lines of the model-and-rows benchmark programs (bench programs only):
//   PROGRAM --model M --rows R.csv [--name LABEL] [--COUNT N]...
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

namespace grove::bench {

struct ModelRowsFlags {
  std::string model, rows, name;
  // "--shap-rows" -> its value; the program puts its defaults in before parsing.
  std::map<std::string, int64_t> counts;
  // Counts for which 0 is a value (e.g. "skip this part"); every other count must be positive.
  std::set<std::string> may_be_zero;

  int64_t count(const std::string& flag) const { return counts.at(flag); }
  // LABEL, or the model path when --name is absent.
  const std::string& label() const { return name.empty() ? model : name; }
};

// Parses "--flag value" pairs into `flags`; false on an unknown flag, a count that is not a positive
// integer (or 0, for the counts in may_be_zero), or a missing --model / --rows.
bool ParseModelRowsFlags(int argc, char** argv, ModelRowsFlags* flags);

// A bench program's flags: each registered name with the field it sets. Parse reads
// "--name value" pairs (a switch takes no value) into them; a number that does not parse, a flag
// without its value or an unknown flag is printed to stderr and Parse answers false.
class FlagSet {
 public:
  void String(const std::string& name, std::string* field);
  void Int(const std::string& name, int64_t* field);
  void Int(const std::string& name, int* field);
  void Double(const std::string& name, double* field);
  void Switch(const std::string& name, bool* field);  // set true when given
  // Any other value: `set` receives the flag's text.
  void Custom(const std::string& name, std::function<bool(const std::string& value)> set);
  bool Parse(int argc, char** argv) const;

 private:
  std::map<std::string, std::function<bool(const std::string&)>> valued_;
  std::map<std::string, bool*> switches_;
};

// Registers the model-and-rows flags --model, --rows and --name on `set`, into the three fields;
// a program without --name passes no `name`.
void AddModelRowsFlags(FlagSet* set, std::string* model, std::string* rows,
                       std::string* name = nullptr);

// Registers the flags of a program that times predictions and explanations of a number of rows:
// --predict-rows, --explain-rows and --explain-strategy, into the three fields (their defaults
// are the program's).
void AddPredictExplainFlags(FlagSet* set, int64_t* predict_rows, int64_t* explain_rows,
                            std::string* explain_strategy);

}  // namespace grove::bench
