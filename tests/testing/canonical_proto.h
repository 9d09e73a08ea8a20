// A Protobuf message's bytes with map entries in key order, for comparing messages: plain
// serialization orders a map's entries by its hash table (two equal messages could differ), and
// field-by-field comparison calls a NaN different from itself. Header-only (the fuzz targets use
// it without the test library).
#pragma once

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"

namespace grove::testing {

inline std::string CanonicalBytes(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace grove::testing
