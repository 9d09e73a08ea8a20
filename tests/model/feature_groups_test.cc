// Declared feature groups: parsing groups.json, resolving names and indices against a model, the
// output order, and every refusal naming what is wrong.
#include "core/model/feature_groups.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/input_schema.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

const std::vector<std::string> kNames = {"street", "zip", "red", "green", "city", "blue", "age"};

absl::StatusOr<FeatureGroupsPtr> Resolve(absl::string_view json, int num_features = 7,
                                         const std::vector<std::string>& names = kNames) {
  absl::StatusOr<std::vector<GroupSpec>> spec = ParseFeatureGroupsJson(json, "groups.json");
  if (!spec.ok()) return spec.status();
  return ResolveFeatureGroups(*spec, num_features, names);
}

void ExpectRefused(absl::StatusOr<FeatureGroupsPtr> got, const std::string& words) {
  ASSERT_FALSE(got.ok()) << words;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find(words), absl::string_view::npos) << got.status();
}

TEST(FeatureGroupsTest, NamesAndIndicesResolveInFeatureOrder) {
  absl::StatusOr<FeatureGroupsPtr> g =
      Resolve(R"({"onehot_color": [2, 3, 5], "address": ["street", "zip", "city"]})");
  ASSERT_TRUE(g.ok()) << g.status();
  const FeatureGroups& groups = **g;
  // Numbered by the smallest member: address (0), onehot_color (2), age (6).
  EXPECT_EQ(groups.names, (std::vector<std::string>{"address", "onehot_color", "age"}));
  EXPECT_EQ(groups.members[0], (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(groups.members[1], (std::vector<int32_t>{2, 3, 5}));
  EXPECT_EQ(groups.members[2], (std::vector<int32_t>{6}));
  EXPECT_EQ(groups.group_of, (std::vector<int32_t>{0, 0, 1, 1, 0, 1, 2}));
}

TEST(FeatureGroupsTest, TheSameGroupingHasTheSameKeyHoweverDeclared) {
  absl::StatusOr<FeatureGroupsPtr> a = Resolve(R"({"a": ["zip", 0], "b": [3, 2]})");
  absl::StatusOr<FeatureGroupsPtr> b = Resolve(R"({"b": ["red", "green"], "a": [0, 1]})");
  absl::StatusOr<FeatureGroupsPtr> c = Resolve(R"({"a": [0, 1], "c": [3, 2]})");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ((*a)->Key(), (*b)->Key());
  EXPECT_NE((*a)->Key(), (*c)->Key());
}

TEST(FeatureGroupsTest, ModelsWithoutNamesUseXgboostNames) {
  absl::StatusOr<FeatureGroupsPtr> g = Resolve(R"({"first": ["f0", 1]})", 3, {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->names, (std::vector<std::string>{"first", "f2"}));
  // No groups: every feature its own.
  absl::StatusOr<FeatureGroupsPtr> none = Resolve("{}", 2, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->names, (std::vector<std::string>{"f0", "f1"}));
}

// Names that do not cover every feature are not the model's names, for groups as for request
// columns (FeatureNamesOrDefault): the features are f0, f1, ...
TEST(FeatureGroupsTest, PartialNamesAreNotTheModelsNames) {
  ExpectRefused(Resolve(R"({"g": ["a"]})", 2, {"a"}), "is not a feature of the model");
  absl::StatusOr<FeatureGroupsPtr> g = Resolve(R"({"g": ["f0"]})", 2, {"a"});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->names, (std::vector<std::string>{"g", "f1"}));
  EXPECT_EQ(FeatureNameOf({"a"}, 2, 0), "f0");
  EXPECT_EQ(FeatureNameOf({"a", "b"}, 2, 1), "b");
}

TEST(FeatureGroupsTest, RefusesWhatIsNotAPartitionOfTheFeatures) {
  ExpectRefused(Resolve(R"({"a": [0, 1], "b": [1, 2]})"),
                "feature 1 (\"zip\") is in group \"a\" and in group \"b\"");
  ExpectRefused(Resolve(R"({"a": [0, "street"]})"), "is in group \"a\" twice");
  ExpectRefused(Resolve(R"({"a": [7]})"), "group \"a\": feature 7 is not a feature of the model");
  ExpectRefused(Resolve(R"({"a": ["nope"]})"), "feature \"nope\" is not a feature of the model");
  ExpectRefused(Resolve(R"({"a": []})"), "group \"a\" has no feature");
  ExpectRefused(Resolve(R"({"age": [0, 1]})"), "has the name of feature 6");
  ExpectRefused(Resolve(R"({"a": [0], "a": [1]})"), "group \"a\" is declared twice");
  ExpectRefused(Resolve(absl::StrCat("{\"", std::string(kMaxGroupNameBytes + 1, 'x'), "\": [0]}")),
                "a group name has 1 to 256 bytes");
  ExpectRefused(Resolve(R"({"": [0]})"), "a group name has 1 to 256 bytes");
  ExpectRefused(Resolve(R"({"a": [0], "b": [1], "c": [2]})", 2, {}), "3 groups were declared");
}

TEST(FeatureGroupsTest, RefusesTextThatIsNotGroups) {
  ExpectRefused(Resolve("[1, 2]"), "groups.json: groups are a JSON object");
  ExpectRefused(Resolve(R"({"a": 1})"), "groups.json: group \"a\": an array");
  ExpectRefused(Resolve(R"({"a": [1.5]})"), "1.5 is neither a feature name nor a feature index");
  ExpectRefused(Resolve(R"({"a": [-1]})"), "-1 is neither");
  ExpectRefused(Resolve(R"({"a": [[0]]})"), "nested deeper");
  ExpectRefused(Resolve(std::string(100000, '[')), "nested deeper");
  ExpectRefused(Resolve("{"), "groups.json: not JSON");
  ExpectRefused(Resolve(std::string(kMaxGroupsJsonBytes + 1, ' ')), "groups take at most");
  // A huge index is out of range, not wrapped.
  ExpectRefused(Resolve(R"({"a": [18446744073709551615]})"), "is not a feature of the model");
}

}  // namespace
}  // namespace grove
