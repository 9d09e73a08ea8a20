// CatboostCategoryHash (core/model/catboost_hash.h) against the hashes CatBoost 1.2.10 wrote: every
// value below was read from `features_info.categorical_features[].values` of a one-hot model that
// CatBoost trained on these strings (one_hot_max_size=255, every category split on), so each of
// CityHash64's length classes (0, 1-3, 4-8, 9-16, 17-32, 33-64, over 64 bytes, over 128: several
// 64-byte blocks) is checked against the library itself.
#include "core/model/catboost_hash.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace grove {
namespace {

// The strings were prefixes of this text, of the lengths below.
constexpr char kText[] =
    "The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ "
    "abcdefghijklmnopqrstuvwxyz! Lorem ipsum dolor sit amet, consectetur adipiscing elit.";

TEST(CatboostHashTest, PrefixesOfEveryLengthClassMatchCatboost) {
  struct Known {
    size_t length;
    uint32_t hash;
  };
  const Known known[] = {
      {0, 797982799u},    {1, 311401451u},    {2, 1391204213u},   {3, 802589044u},
      {4, 3051752953u},   {7, 3950516137u},   {8, 3664305727u},   {9, 62722841u},
      {15, 2874732688u},  {16, 3688493868u},  {17, 2361206127u},  {24, 3020692229u},
      {31, 1752146168u},  {32, 704156603u},   {33, 2239288843u},  {48, 2291814073u},
      {63, 1355163962u},  {64, 1682555747u},  {65, 1896881598u},  {100, 3931441259u},
      {127, 1963450731u}, {128, 1274312497u}, {129, 2745107950u}, {150, 497828677u},
  };
  const std::string text(kText);
  for (const Known& k : known) {
    SCOPED_TRACE(k.length);
    ASSERT_LE(k.length, text.size());
    EXPECT_EQ(CatboostCategoryHash(absl::string_view(text.data(), k.length)), k.hash);
  }
}

TEST(CatboostHashTest, Utf8AndIntegerCategoriesMatchCatboost) {
  // UTF-8 bytes as they are; integer categories as their decimal text (a pandas int column). The
  // JSON writes the hashes as signed int32.
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("orl\xC3\xA9" "ans")), 872145776);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("\xE6\x9D\xB1\xE4\xBA\xAC")), 991853845);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("paris")), -1368605110);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("0")), -1438285038);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("1")), 1121341681);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("3")), 593172586);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash("4")), -78686594);
  // Runs of one byte at the class boundaries (32, 33, 64, 65 and 200 bytes).
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash(std::string(32, 'z'))), -1698488811);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash(std::string(33, 'w'))), -2078726570);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash(std::string(64, 'v'))), 545430306);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash(std::string(65, 'u'))), -1455556261);
  EXPECT_EQ(static_cast<int32_t>(CatboostCategoryHash(std::string(200, 't'))), -353831592);
}

TEST(CatboostHashTest, ReadsOnlyTheGivenBytes) {
  // The first n bytes of two buffers that differ only after them hash alike, and like a copy of
  // exactly those bytes: a load past [data, data + size) would see the different trailing bytes.
  const std::string text(kText);
  for (size_t n = 0; n <= text.size(); ++n) {
    SCOPED_TRACE(n);
    const std::string low = text.substr(0, n) + std::string(72, '\x00');
    const std::string high = text.substr(0, n) + std::string(72, '\xff');
    const std::string copy = text.substr(0, n);
    const uint64_t want = CityHash64V1(copy);
    EXPECT_EQ(CityHash64V1(absl::string_view(low.data(), n)), want);
    EXPECT_EQ(CityHash64V1(absl::string_view(high.data(), n)), want);
    EXPECT_EQ(CatboostCategoryHash(absl::string_view(high.data(), n)), CatboostCategoryHash(copy));
    // The control: one byte more, and the trailing bytes count.
    EXPECT_NE(CityHash64V1(absl::string_view(low.data(), n + 1)),
              CityHash64V1(absl::string_view(high.data(), n + 1)));
  }
}

}  // namespace
}  // namespace grove
