#include "server/grpc/wire_rows.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grove/v1/grove.pb.h"
#include "inference/grpc_service.pb.h"
#include "tests/testing/canonical_proto.h"

namespace grove::server {
namespace {

// `bytes` cut into pieces of `size` bytes (the last shorter), as gRPC's slices hold a message.
std::vector<WirePiece> Cut(const std::string& bytes, size_t size) {
  std::vector<WirePiece> pieces;
  for (size_t at = 0; at < bytes.size(); at += size) {
    pieces.push_back(WirePiece{bytes.data() + at, std::min(size, bytes.size() - at)});
  }
  return pieces;
}

std::string Payload(const RawRowsSplit& split) {
  std::string out;
  for (const WirePiece& p : split.payload) out.append(p.data, p.size);
  return out;
}

grove::v1::PredictRequest BigRequest(size_t payload_bytes) {
  grove::v1::PredictRequest req;
  req.set_model("adult");
  req.set_version(3);
  req.add_outputs(grove::v1::OUTPUT_MARGIN);
  req.add_outputs(grove::v1::OUTPUT_LEAF);
  req.set_explain(true);
  req.add_explain_rows(5);
  req.mutable_rows()->set_rows(static_cast<int64_t>(payload_bytes / 56));
  req.mutable_rows()->set_cols(14);
  std::string raw(payload_bytes, '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 131 + 7);
  req.mutable_rows()->set_raw_f32(raw);
  req.set_iteration_end(40);
  return req;
}

// The contract: a split is exact. Parsing `rest` and setting raw_f32 to the payload gives the
// message the whole bytes give, and `rest` fails to parse exactly when the whole bytes do.
template <typename Message>
void ExpectExact(const std::string& bytes, const RawRowsSplit& split) {
  Message whole, parts;
  const bool whole_ok = whole.ParseFromString(bytes);
  const bool parts_ok = parts.ParseFromString(split.rest);
  ASSERT_EQ(whole_ok, parts_ok);
  if (!whole_ok) return;
  EXPECT_TRUE(parts.rows().raw_f32().empty());
  EXPECT_EQ(Payload(split).size(), split.payload_bytes);
  parts.mutable_rows()->set_raw_f32(Payload(split));
  // As bytes: field by field, a NaN value would differ from itself.
  EXPECT_EQ(grove::testing::CanonicalBytes(whole), grove::testing::CanonicalBytes(parts));
}

TEST(SplitRawRows, FindsThePayloadWhereverTheSlicesCutIt) {
  const grove::v1::PredictRequest req = BigRequest(300 << 10);
  const std::string bytes = req.SerializeAsString();
  for (size_t size : {size_t{1}, size_t{7}, size_t{4096}, size_t{16384}, bytes.size()}) {
    std::optional<RawRowsSplit> split = SplitRawRows(Cut(bytes, size), kGroveRawRows);
    ASSERT_TRUE(split.has_value()) << size;
    EXPECT_EQ(split->payload_bytes, req.rows().raw_f32().size());
    EXPECT_EQ(Payload(*split), req.rows().raw_f32());
    EXPECT_LT(split->rest.size(), 64u);
    ExpectExact<grove::v1::PredictRequest>(bytes, *split);
  }
  // Empty pieces between the others change nothing.
  std::vector<WirePiece> pieces;
  for (const WirePiece& p : Cut(bytes, 5000)) {
    pieces.push_back(WirePiece{p.data, 0});
    pieces.push_back(p);
  }
  std::optional<RawRowsSplit> split = SplitRawRows(pieces, kGroveRawRows);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(Payload(*split), req.rows().raw_f32());
}

TEST(SplitRawRows, ExplainRequestsAndFieldsAfterTheRows) {
  grove::v1::ExplainRequest req;
  req.set_model("m");
  req.mutable_rows()->set_rows(1);
  req.mutable_rows()->set_cols(1);
  req.mutable_rows()->set_raw_f32(std::string(kMinSplitPayloadBytes, 'x'));
  req.set_top_k(3);
  req.set_sequence(99);
  req.set_method(grove::v1::EXPLAIN_METHOD_INTERVENTIONAL);
  const std::string bytes = req.SerializeAsString();
  std::optional<RawRowsSplit> split = SplitRawRows(Cut(bytes, 16384), kGroveRawRows);
  ASSERT_TRUE(split.has_value());
  ExpectExact<grove::v1::ExplainRequest>(bytes, *split);
}

TEST(SplitRawRows, LeavesEveryOtherFormWhole) {
  const std::string big(kMinSplitPayloadBytes, 'r');
  auto split_of = [](const std::string& bytes) { return SplitRawRows(Cut(bytes, 4096), kGroveRawRows); };

  grove::v1::PredictRequest small = BigRequest(1024);
  EXPECT_FALSE(split_of(small.SerializeAsString()).has_value());  // below the threshold
  EXPECT_TRUE(SplitRawRows(Cut(small.SerializeAsString(), 100), kGroveRawRows, 1).has_value());

  grove::v1::PredictRequest values;
  values.set_model("m");
  values.mutable_rows()->mutable_values()->Resize(100000, 1.0f);
  EXPECT_FALSE(split_of(values.SerializeAsString()).has_value());  // no raw_f32

  grove::v1::PredictRequest f64;
  f64.mutable_rows()->set_raw_f64(big);
  EXPECT_FALSE(split_of(f64.SerializeAsString()).has_value());

  // The rows Matrix twice (Protobuf merges them): left whole.
  grove::v1::PredictRequest one = BigRequest(300 << 10);
  grove::v1::PredictRequest rows_only;
  rows_only.mutable_rows()->set_rows(7);
  EXPECT_FALSE(split_of(one.SerializeAsString() + rows_only.SerializeAsString()).has_value());
  // raw_f32 twice inside one Matrix (Protobuf keeps the last): left whole.
  grove::v1::Matrix m1, m2;
  m1.set_raw_f32(big);
  m2.set_raw_f32("abcd");
  std::string matrix = m1.SerializeAsString() + m2.SerializeAsString();
  std::string twice;
  twice.push_back(static_cast<char>(3 << 3 | 2));
  for (uint64_t v = matrix.size(); ; v >>= 7) {
    twice.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    if (v < 0x80) break;
  }
  twice += matrix;
  EXPECT_FALSE(split_of(twice).has_value());
  grove::v1::PredictRequest merged;
  ASSERT_TRUE(merged.ParseFromString(twice));
  EXPECT_EQ(merged.rows().raw_f32(), "abcd");

  // Truncated anywhere: left whole (Protobuf reports it).
  const std::string bytes = one.SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_FALSE(split_of(bytes.substr(0, cut)).has_value()) << cut;
  }
  // A group, or the rows field as a varint: left whole.
  EXPECT_FALSE(split_of(std::string("\x1b", 1) + bytes).has_value());  // field 3, start group
  EXPECT_FALSE(split_of(std::string("\x18\x01", 2) + bytes).has_value());  // field 3 as varint
  EXPECT_FALSE(SplitRawRows(Cut(bytes, 4096), RawRowsField{}).has_value());
}

// Random damage to valid requests: whatever is split is split exactly (the fuzzer,
// tests/fuzz/wire_rows_fuzz.cc, does the same from arbitrary bytes).
TEST(SplitRawRows, DamagedRequestsAreSplitExactlyOrNotAtAll) {
  std::mt19937_64 rng(20261126);
  const std::string base = BigRequest(4096).SerializeAsString();
  int splits = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bytes = base;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: bytes.erase(at, 1 + rng() % 4); break;
        case 2: bytes.insert(at, 1, static_cast<char>(rng())); break;
        default: bytes.insert(at, bytes.substr(0, std::min<size_t>(bytes.size(), rng() % 40))); break;
      }
      if (bytes.empty()) bytes = base;
    }
    std::optional<RawRowsSplit> split = SplitRawRows(Cut(bytes, 1 + rng() % 600), kGroveRawRows, 1);
    if (!split.has_value()) continue;
    ++splits;
    ExpectExact<grove::v1::PredictRequest>(bytes, *split);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
  EXPECT_GT(splits, 1000);  // most damage lands in the payload, which splits as before
}


// Found by tests/fuzz/wire_rows_fuzz.cc: a NaN among the values (compared field by field, NaN is
// not equal to itself; the messages are compared as their bytes).
TEST(SplitRawRows, FuzzRegressions) {
  const std::string input("\xff\x0a\x01\x6d\x08\x02\x1a\x56\x10\x08\x2a\x40\x00\x00\x00\x00\x00\xc0\xff\xff\x01\x0a\x01\x6d\x1a\x46\xf8\x30\xfc\x30\x30\x30\x38\x38\x38\x20\x20\x20\x20\x20\x20\x35\x08\x2a\x40\x00\x00\x00\x00\x00\x00\x00\x3f\x00\x00\x80\x3f\x00\x00\xc0\x3f\x00\x00\x00\x40\x00\x00\x20\x40\x00\x00\x00\x00\x08\x46\x3a\x1a\x10\x1a\x46\x08\x3a\x10\x08\x2a\x40\x00\x00\xff\xff\x00\x00\x40\x00\x40\x00", 96);
  const std::string bytes = input.substr(1);
  std::vector<WirePiece> pieces = Cut(bytes, 1 + static_cast<uint8_t>(input[0]));
  std::optional<RawRowsSplit> split = SplitRawRows(pieces, kGroveRawRows, 1);
  if (!split.has_value()) return;
  ExpectExact<grove::v1::PredictRequest>(bytes, *split);
  ExpectExact<grove::v1::ExplainRequest>(bytes, *split);
}

// KServe: the one raw_input_contents entry, a top-level repeated bytes field, is split exactly;
// two entries (or none) are left whole.
TEST(SplitRawRows, KserveRawInputContents) {
  inference::ModelInferRequest req;
  req.set_model_name("adult");
  req.set_id("call-7");
  auto* in = req.add_inputs();
  in->set_name("input__0");
  in->set_datatype("FP32");
  in->add_shape(5000);
  in->add_shape(14);
  req.add_outputs()->set_name("output__0");
  req.add_raw_input_contents(std::string(5000 * 14 * 4, 'k'));
  (*req.mutable_parameters())["threshold"].set_double_param(0.25);
  const std::string bytes = req.SerializeAsString();
  for (size_t size : {size_t{3}, size_t{16384}, bytes.size()}) {
    std::optional<RawRowsSplit> split = SplitRawRows(Cut(bytes, size), kKserveRawRows);
    ASSERT_TRUE(split.has_value()) << size;
    EXPECT_EQ(Payload(*split), req.raw_input_contents(0));
    inference::ModelInferRequest whole, parts;
    ASSERT_TRUE(whole.ParseFromString(bytes));
    ASSERT_TRUE(parts.ParseFromString(split->rest));
    EXPECT_EQ(parts.raw_input_contents_size(), 0);
    parts.add_raw_input_contents(Payload(*split));
    EXPECT_EQ(grove::testing::CanonicalBytes(whole), grove::testing::CanonicalBytes(parts));
  }
  inference::ModelInferRequest two = req;
  two.add_raw_input_contents("abcd");
  EXPECT_FALSE(SplitRawRows(Cut(two.SerializeAsString(), 4096), kKserveRawRows).has_value());
  inference::ModelInferRequest none = req;
  none.clear_raw_input_contents();
  EXPECT_FALSE(SplitRawRows(Cut(none.SerializeAsString(), 4096), kKserveRawRows).has_value());
  // A grove request is not a KServe one: its field 7 is explain (varint), left whole.
  EXPECT_FALSE(SplitRawRows(Cut(BigRequest(300 << 10).SerializeAsString(), 4096), kKserveRawRows)
                   .has_value());
}

// Found by tests/fuzz/wire_rows_fuzz.cc: a KServe request with two parameters map entries (plain
// serialization orders a map by its hash table; compared in key order).
TEST(SplitRawRows, FuzzRegressionKserveMap) {
  const std::string input("\x0f\x0a\x01\x6d\x12\x01\x31\x22\x14\x0a\x08\x69\x70\x75\x6e\x74\x5f\x42\x30\x30\x30\x30\x30\x30\x30\x30\x3a\x30\x30\x1a\x02\x01\x31\x6d\x12\x01\x31\x22\xa2\x00\x00\xc0\x00\x68\x3a\x40\x00\x00\x00\x00\x41\x00\x00\x00\x00\x41\x20\x41\x00\x40\x41\x00\x40\x14\x0a\x08\x69\x70\x75\x6e\x74\x5f\x42\x30\x30\x30\x30\x30\x30\x30\x30\x3a\x30\x30\x32\x02\x01\x31\x22\x14\x0a\x08\x69\x70\x75\x6e\x74\x5f\x40\x30\x12\x84\x46\x50\x36\x2a\xb0\x30\x30\x30\x30\x30\x30\x30\x30\x30\x30\x31\x1a\x02\x02\x01", 122);
  const std::string bytes = input.substr(1);
  std::optional<RawRowsSplit> split =
      SplitRawRows(Cut(bytes, 1 + static_cast<uint8_t>(input[0])), kKserveRawRows, 1);
  ASSERT_TRUE(split.has_value());
  inference::ModelInferRequest whole, parts;
  ASSERT_EQ(whole.ParseFromString(bytes), parts.ParseFromString(split->rest));
  parts.add_raw_input_contents(Payload(*split));
  EXPECT_EQ(grove::testing::CanonicalBytes(whole), grove::testing::CanonicalBytes(parts));
}

}  // namespace
}  // namespace grove::server
