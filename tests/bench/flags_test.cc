// The model-and-rows bench programs' command lines (bench/common/flags.h): counts positive unless
// the program lets a count be 0, unknown flags and missing --model / --rows refused.
#include "bench/common/flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grove::bench {
namespace {

bool Parse(std::vector<std::string> args, ModelRowsFlags* flags) {
  args.insert(args.begin(), "bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseModelRowsFlags(static_cast<int>(argv.size()), argv.data(), flags);
}

ModelRowsFlags Defaults() {
  ModelRowsFlags flags;
  flags.counts = {{"--reps", 5}, {"--interactions-rows", 1000}};
  return flags;
}

TEST(ModelRowsFlagsTest, ReadsModelRowsNameAndCounts) {
  ModelRowsFlags flags = Defaults();
  ASSERT_TRUE(Parse({"--model", "m.ubj", "--rows", "r.csv", "--name", "m", "--reps", "7"}, &flags));
  EXPECT_EQ(flags.model, "m.ubj");
  EXPECT_EQ(flags.rows, "r.csv");
  EXPECT_EQ(flags.label(), "m");
  EXPECT_EQ(flags.count("--reps"), 7);
  EXPECT_EQ(flags.count("--interactions-rows"), 1000);  // the default stays
}

TEST(ModelRowsFlagsTest, ZeroOnlyWhereTheProgramAllowsIt) {
  ModelRowsFlags flags = Defaults();
  EXPECT_FALSE(Parse({"--model", "m", "--rows", "r", "--interactions-rows", "0"}, &flags));
  flags = Defaults();
  flags.may_be_zero = {"--interactions-rows"};
  ASSERT_TRUE(Parse({"--model", "m", "--rows", "r", "--interactions-rows", "0"}, &flags));
  EXPECT_EQ(flags.count("--interactions-rows"), 0);
  EXPECT_FALSE(Parse({"--model", "m", "--rows", "r", "--reps", "0"}, &flags));
  EXPECT_FALSE(Parse({"--model", "m", "--rows", "r", "--interactions-rows", "-1"}, &flags));
}

TEST(ModelRowsFlagsTest, RefusesUnknownFlagsAndMissingInputs) {
  const std::vector<std::vector<std::string>> refused = {
      {"--model", "m", "--rows", "r", "--bogus", "1"},
      {"--model", "m"},
      {"--rows", "r"},
      {"--model", "m", "--rows"},  // a flag without its value
      {"--model", "m", "--rows", "r", "--reps", "x"}};
  for (const std::vector<std::string>& args : refused) {
    ModelRowsFlags flags = Defaults();
    EXPECT_FALSE(Parse(args, &flags)) << args.size() << " arguments, the last " << args.back();
  }
}

}  // namespace
}  // namespace grove::bench
