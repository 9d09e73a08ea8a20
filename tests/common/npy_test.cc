#include "core/io/npy.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A .npy file as numpy.save writes it: magic, version, little-endian header length, the header
// padded with spaces to a multiple of 64 bytes and ended by '\n', then `data`.
std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = 8 + (major == 1 ? 2 : 4);
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 255);
  return out + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

absl::StatusOr<NpyArray> Parse(const std::string& bytes, int64_t max_values = 1000) {
  return ParseNpy(bytes, "bg.npy", max_values);
}

TEST(Npy, Float64CRowMajor) {
  const std::string f = Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                            Bytes<double>({1, 2, 3, 4, NAN, 6.5}));
  absl::StatusOr<NpyArray> a = Parse(f);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 3));
  ASSERT_EQ(a->values.size(), 6u);
  EXPECT_EQ(a->values[3], 4);
  EXPECT_TRUE(std::isnan(a->values[4]));
  EXPECT_EQ(a->values[5], 6.5);
}

TEST(Npy, FortranOrderIsTransposedToRowMajor) {
  // [[1, 2, 3], [4, 5, 6]] in Fortran order is 1 4 2 5 3 6.
  const std::string f = Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                            Bytes<float>({1, 4, 2, 5, 3, 6}));
  absl::StatusOr<NpyArray> a = Parse(f);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(Npy, IntegerDtypesVersionsAndKeyOrder) {
  absl::StatusOr<NpyArray> a = Parse(
      Npy("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i8\"}",
          Bytes<int64_t>({-5, 0, 7}), 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(-5, 0, 7));
  a = Parse(Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1), }",
                std::string("\xff\x01", 2), 3));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(255, 1));
  a = Parse(Npy("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4), }", ""));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(0, 4));
  EXPECT_TRUE(a->values.empty());
}

TEST(Npy, BoolAndTheOtherIntegerWidths) {
  absl::StatusOr<NpyArray> a = Parse(
      Npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
          std::string("\x01\x00\x01", 3)));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(1, 0, 1));
  a = Parse(Npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
                Bytes<int16_t>({-300, 7})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(-300, 7));
  a = Parse(Npy("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
                Bytes<uint16_t>({65535})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(65535));
  a = Parse(Npy("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }",
                Bytes<uint32_t>({4000000000u})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(4000000000.0));
  a = Parse(Npy("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }",
                Bytes<uint64_t>({uint64_t{1} << 40})));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->values, ElementsAre(1099511627776.0));
}

TEST(Npy, MalformedFilesNameTheProblem) {
  const std::string ok_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }";
  const std::string two = Bytes<double>({1, 2});
  struct Case {
    std::string bytes;
    std::string message;
  } cases[] = {
      {"", "magic"},
      {"PK\x03\x04 zip file", "magic"},
      {Npy(ok_dict, two, 4), "format version 4.0"},
      {Npy(ok_dict, two).substr(0, 9), "truncated header length"},
      {Npy(ok_dict, two).substr(0, 40), "past the end"},
      {Npy(ok_dict, two + "x"), "16 bytes of data, 17 follow"},
      {Npy(ok_dict, two.substr(0, 15)), "16 bytes of data, 15 follow"},
      {Npy("{'descr': '>f8', 'fortran_order': False, 'shape': (1, 2), }", two), "dtype '>f8'"},
      {Npy("{'descr': '|O', 'fortran_order': False, 'shape': (1, 2), }", two), "dtype '|O'"},
      {Npy("{'descr': '<f8', 'shape': (1, 2), }", two), "lacks"},
      {Npy("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1, 2)}", two),
       "repeated header key 'descr'"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), 'x': 1}", two),
       "unexpected or repeated header key 'x'"},
      {Npy("{'descr': '<f8', 'fortran_order': 0, 'shape': (1, 2)}", two), "True or False"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': [1, 2]}", two), "must be a tuple"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1, -2)}", two),
       "non-negative integers"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", two),
       "too large"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1000, 1000)}", two),
       "more than 1000 values"},
      {Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", two),
       "more than 1000 values"},
      {Npy("{'descr': '<f\\x38', 'fortran_order': False, 'shape': (1, 2)}", two), "escapes"},
      {Npy(ok_dict + " junk", two), "after the header"},
      {Npy("['descr']", two), "not a dict"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NpyArray> a = Parse(c.bytes);
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr("bg.npy: not a valid .npy file"));
    EXPECT_THAT(a.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace grove
