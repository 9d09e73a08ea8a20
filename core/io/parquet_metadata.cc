#include "core/io/parquet_metadata.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/io/thrift_compact.h"

namespace grove {
namespace {

// Calls field(id, type) for each field of the struct that starts at the reader's position;
// `field` reads or skips the value.
template <typename Field>
void ReadStruct(ThriftCompactReader& r, Field field) {
  if (!r.EnterStruct()) return;
  int16_t last = 0, id;
  uint8_t type;
  while (r.NextField(&last, &id, &type)) field(id, type);
  r.ExitStruct();
}

// Calls element(type) for each element of the list field of `type`.
template <typename Element>
void ReadList(ThriftCompactReader& r, uint8_t type, Element element) {
  uint8_t element_type;
  const int64_t n = r.ReadListHeader(type, &element_type);
  for (int64_t i = 0; i < n && r.ok(); ++i) element(element_type);
}

void ExpectStruct(ThriftCompactReader& r, uint8_t type, const char* what) {
  if (type != kThriftStruct) r.Fail(absl::StrCat(what, ": a struct expected, found type ", type));
}

void ReadLogicalType(ThriftCompactReader& r, ParquetSchemaElement* e) {
  // A union: one field, whose id names the logical type; INTEGER (10) holds the width and sign.
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    e->logical_type = id;
    if (id != 10 || type != kThriftStruct) {
      r.Skip(type);
      return;
    }
    ReadStruct(r, [&](int16_t f, uint8_t t) {
      if (f == 1)
        e->int_bit_width = r.ReadI32(t);
      else if (f == 2)
        e->int_signed = r.ReadBool(t);
      else
        r.Skip(t);
    });
  });
}

ParquetSchemaElement ReadSchemaElement(ThriftCompactReader& r) {
  ParquetSchemaElement e;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    switch (id) {
      case 1:
        e.type = r.ReadI32(type);
        break;
      case 3:
        e.repetition = r.ReadI32(type);
        break;
      case 4:
        e.name = r.ReadBinary(type);
        break;
      case 5:
        e.num_children = r.ReadI32(type);
        break;
      case 6:
        e.converted_type = r.ReadI32(type);
        break;
      case 10:
        ExpectStruct(r, type, "logicalType");
        ReadLogicalType(r, &e);
        break;
      default:
        r.Skip(type);
    }
  });
  return e;
}

void ReadColumnMetaData(ThriftCompactReader& r, ParquetColumnChunk* c) {
  c->has_meta_data = true;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    switch (id) {
      case 1:
        c->type = r.ReadI32(type);
        break;
      case 3:
        ReadList(r, type, [&](uint8_t t) { c->path.push_back(r.ReadBinary(t)); });
        break;
      case 4:
        c->codec = r.ReadI32(type);
        break;
      case 5:
        c->num_values = r.ReadI64(type);
        break;
      case 7:
        c->total_compressed_size = r.ReadI64(type);
        break;
      case 9:
        c->data_page_offset = r.ReadI64(type);
        break;
      case 11:
        c->dictionary_page_offset = r.ReadI64(type);
        break;
      default:
        r.Skip(type);
    }
  });
}

ParquetColumnChunk ReadColumnChunk(ThriftCompactReader& r) {
  ParquetColumnChunk c;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 1) {
      c.external = true;
      r.Skip(type);
    } else if (id == 3) {
      ExpectStruct(r, type, "ColumnChunk.meta_data");
      ReadColumnMetaData(r, &c);
    } else {
      r.Skip(type);
    }
  });
  return c;
}

ParquetRowGroup ReadRowGroup(ThriftCompactReader& r) {
  ParquetRowGroup g;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 1) {
      ReadList(r, type, [&](uint8_t t) {
        ExpectStruct(r, t, "RowGroup.columns");
        g.columns.push_back(ReadColumnChunk(r));
      });
    } else if (id == 3) {
      g.num_rows = r.ReadI64(type);
    } else {
      r.Skip(type);
    }
  });
  return g;
}

}  // namespace

absl::StatusOr<ParquetFileMetaData> ParseParquetFileMetaData(absl::string_view bytes) {
  ThriftCompactReader r(bytes);
  ParquetFileMetaData meta;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    switch (id) {
      case 2:
        ReadList(r, type, [&](uint8_t t) {
          ExpectStruct(r, t, "FileMetaData.schema");
          meta.schema.push_back(ReadSchemaElement(r));
        });
        break;
      case 3:
        meta.num_rows = r.ReadI64(type);
        break;
      case 4:
        ReadList(r, type, [&](uint8_t t) {
          ExpectStruct(r, t, "FileMetaData.row_groups");
          meta.row_groups.push_back(ReadRowGroup(r));
        });
        break;
      default:
        r.Skip(type);
    }
  });
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("malformed footer: ", r.error()));
  return meta;
}

absl::StatusOr<ParquetPageHeader> ParseParquetPageHeader(absl::string_view bytes,
                                                         size_t* header_size) {
  ThriftCompactReader r(bytes);
  ParquetPageHeader h;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    switch (id) {
      case 1:
        h.type = r.ReadI32(type);
        break;
      case 2:
        h.uncompressed_page_size = r.ReadI32(type);
        break;
      case 3:
        h.compressed_page_size = r.ReadI32(type);
        break;
      case 5:  // DataPageHeader
        ExpectStruct(r, type, "data_page_header");
        h.has_kind_header = h.type == kParquetDataPage;
        ReadStruct(r, [&](int16_t f, uint8_t t) {
          switch (f) {
            case 1:
              h.num_values = r.ReadI32(t);
              break;
            case 2:
              h.encoding = r.ReadI32(t);
              break;
            case 3:
              h.definition_level_encoding = r.ReadI32(t);
              break;
            case 4:
              h.repetition_level_encoding = r.ReadI32(t);
              break;
            default:
              r.Skip(t);
          }
        });
        break;
      case 7:  // DictionaryPageHeader
        ExpectStruct(r, type, "dictionary_page_header");
        h.has_kind_header = h.type == kParquetDictionaryPage;
        ReadStruct(r, [&](int16_t f, uint8_t t) {
          if (f == 1)
            h.num_values = r.ReadI32(t);
          else if (f == 2)
            h.encoding = r.ReadI32(t);
          else
            r.Skip(t);
        });
        break;
      case 8:  // DataPageHeaderV2
        ExpectStruct(r, type, "data_page_header_v2");
        h.has_kind_header = h.type == kParquetDataPageV2;
        ReadStruct(r, [&](int16_t f, uint8_t t) {
          switch (f) {
            case 1:
              h.num_values = r.ReadI32(t);
              break;
            case 2:
              h.num_nulls = r.ReadI32(t);
              break;
            case 3:
              h.num_rows = r.ReadI32(t);
              break;
            case 4:
              h.encoding = r.ReadI32(t);
              break;
            case 5:
              h.definition_levels_byte_length = r.ReadI32(t);
              break;
            case 6:
              h.repetition_levels_byte_length = r.ReadI32(t);
              break;
            case 7:
              h.is_compressed = r.ReadBool(t);
              break;
            default:
              r.Skip(t);
          }
        });
        break;
      default:
        r.Skip(type);
    }
  });
  if (!r.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed page header: ", r.error()));
  }
  *header_size = r.position();
  return h;
}

}  // namespace grove
