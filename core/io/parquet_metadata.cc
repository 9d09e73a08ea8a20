#include "core/io/parquet_metadata.h"

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
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

// The elements a footer's lists may still keep (kMinParquetFooterBytesPerElement).
struct ElementBudget {
  int64_t footer_bytes = 0;
  int64_t left = 0;
};

// Calls element(type) for each element of the list field `what` of `type`, once its count is
// within the bounds (parquet_metadata.h).
template <typename Element>
void ReadList(ThriftCompactReader& r, uint8_t type, const char* what, ElementBudget* budget,
              Element element) {
  uint8_t element_type;
  const int64_t n = r.ReadListHeader(type, &element_type);
  if (n > kMaxParquetListElements) {
    r.Fail(absl::StrCat(what, ": a list of ", n, " elements (at most ", kMaxParquetListElements,
                        " are read)"));
    return;
  }
  if (n > budget->left) {
    r.Fail(absl::StrCat(what, ": ", n, " more elements than a footer of ", budget->footer_bytes,
                        " bytes holds (at most one per ", kMinParquetFooterBytesPerElement,
                        " bytes over every list: ",
                        budget->footer_bytes / kMinParquetFooterBytesPerElement, ")"));
    return;
  }
  budget->left -= n;
  for (int64_t i = 0; i < n && r.ok(); ++i) element(element_type);
}

void ExpectStruct(ThriftCompactReader& r, uint8_t type, const char* what) {
  if (type != kThriftStruct) r.Fail(absl::StrCat(what, ": a struct expected, found type ", type));
}

// A scalar field of a struct: its id and the member its value is read into.
struct ScalarField {
  int16_t id;
  std::variant<int32_t*, int64_t*, bool*, std::string*> target;
};

void ReadValue(ThriftCompactReader& r, uint8_t type, int32_t* v) { *v = r.ReadI32(type); }
void ReadValue(ThriftCompactReader& r, uint8_t type, int64_t* v) { *v = r.ReadI64(type); }
void ReadValue(ThriftCompactReader& r, uint8_t type, bool* v) { *v = r.ReadBool(type); }
void ReadValue(ThriftCompactReader& r, uint8_t type, std::string* v) { *v = r.ReadBinary(type); }

// Reads field `id` into its entry of `fields`, or skips it when `fields` does not list it.
void ReadScalarOrSkip(ThriftCompactReader& r, int16_t id, uint8_t type,
                      absl::Span<const ScalarField> fields) {
  for (const ScalarField& f : fields) {
    if (f.id == id) {
      std::visit([&](auto* v) { ReadValue(r, type, v); }, f.target);
      return;
    }
  }
  r.Skip(type);
}

// Reads a struct whose kept fields are all scalars.
void ReadScalarStruct(ThriftCompactReader& r, absl::Span<const ScalarField> fields) {
  ReadStruct(r, [&](int16_t id, uint8_t type) { ReadScalarOrSkip(r, id, type, fields); });
}

void ReadLogicalType(ThriftCompactReader& r, ParquetSchemaElement* e) {
  // A union: one field, whose id names the logical type; INTEGER (10) holds the width and sign.
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    e->logical_type = id;
    if (id != 10 || type != kThriftStruct) {
      r.Skip(type);
      return;
    }
    const ScalarField integer[] = {{1, &e->int_bit_width}, {2, &e->int_signed}};
    ReadScalarStruct(r, integer);
  });
}

// (A schema element holds no list the budget counts.)
ParquetSchemaElement ReadSchemaElement(ThriftCompactReader& r, ElementBudget* /*budget*/) {
  ParquetSchemaElement e;
  const ScalarField fields[] = {{1, &e.type},
                                {3, &e.repetition},
                                {4, &e.name},
                                {5, &e.num_children},
                                {6, &e.converted_type}};
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 10) {
      ExpectStruct(r, type, "logicalType");
      ReadLogicalType(r, &e);
    } else {
      ReadScalarOrSkip(r, id, type, fields);
    }
  });
  return e;
}

void ReadColumnMetaData(ThriftCompactReader& r, ElementBudget* budget, ParquetColumnChunk* c) {
  c->has_meta_data = true;
  const ScalarField fields[] = {{1, &c->type},
                                {4, &c->codec},
                                {5, &c->num_values},
                                {7, &c->total_compressed_size},
                                {9, &c->data_page_offset},
                                {11, &c->dictionary_page_offset}};
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 3) {
      ReadList(r, type, "ColumnMetaData.path_in_schema", budget,
               [&](uint8_t t) { c->path.push_back(r.ReadBinary(t)); });
    } else {
      ReadScalarOrSkip(r, id, type, fields);
    }
  });
}

ParquetColumnChunk ReadColumnChunk(ThriftCompactReader& r, ElementBudget* budget) {
  ParquetColumnChunk c;
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 1) {
      c.external = true;
      r.Skip(type);
    } else if (id == 3) {
      ExpectStruct(r, type, "ColumnChunk.meta_data");
      ReadColumnMetaData(r, budget, &c);
    } else {
      r.Skip(type);
    }
  });
  return c;
}

// Reads the list field of `type` whose elements are structs, appending read(r) for each.
template <typename T, typename ReadElement>
void ReadStructList(ThriftCompactReader& r, uint8_t type, const char* what, ElementBudget* budget,
                    std::vector<T>* out, ReadElement read) {
  ReadList(r, type, what, budget, [&](uint8_t t) {
    ExpectStruct(r, t, what);
    out->push_back(read(r, budget));
  });
}

ParquetRowGroup ReadRowGroup(ThriftCompactReader& r, ElementBudget* budget) {
  ParquetRowGroup g;
  const ScalarField fields[] = {{3, &g.num_rows}};
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 1) {
      ReadStructList(r, type, "RowGroup.columns", budget, &g.columns, ReadColumnChunk);
    } else {
      ReadScalarOrSkip(r, id, type, fields);
    }
  });
  return g;
}

}  // namespace

absl::StatusOr<ParquetFileMetaData> ParseParquetFileMetaData(absl::string_view bytes) {
  ThriftCompactReader r(bytes);
  ParquetFileMetaData meta;
  ElementBudget budget;
  budget.footer_bytes = static_cast<int64_t>(bytes.size());
  budget.left = budget.footer_bytes / kMinParquetFooterBytesPerElement;
  const ScalarField fields[] = {{3, &meta.num_rows}};
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    if (id == 2) {
      ReadStructList(r, type, "FileMetaData.schema", &budget, &meta.schema, ReadSchemaElement);
    } else if (id == 4) {
      ReadStructList(r, type, "FileMetaData.row_groups", &budget, &meta.row_groups,
                     ReadRowGroup);
    } else {
      ReadScalarOrSkip(r, id, type, fields);
    }
  });
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("malformed footer: ", r.error()));
  return meta;
}

absl::StatusOr<ParquetPageHeader> ParseParquetPageHeader(absl::string_view bytes,
                                                         size_t* header_size) {
  ThriftCompactReader r(bytes);
  ParquetPageHeader h;
  const ScalarField fields[] = {
      {1, &h.type}, {2, &h.uncompressed_page_size}, {3, &h.compressed_page_size}};
  const ScalarField data_page[] = {{1, &h.num_values},
                                   {2, &h.encoding},
                                   {3, &h.definition_level_encoding},
                                   {4, &h.repetition_level_encoding}};
  const ScalarField dictionary_page[] = {{1, &h.num_values}, {2, &h.encoding}};
  const ScalarField data_page_v2[] = {{1, &h.num_values},
                                      {2, &h.num_nulls},
                                      {3, &h.num_rows},
                                      {4, &h.encoding},
                                      {5, &h.definition_levels_byte_length},
                                      {6, &h.repetition_levels_byte_length},
                                      {7, &h.is_compressed}};
  // The kind headers by field id: the struct's name, the page type it belongs to, its fields.
  struct KindHeader {
    int16_t id;
    const char* name;
    int32_t page_type;
    absl::Span<const ScalarField> fields;
  };
  const KindHeader kinds[] = {
      {5, "data_page_header", kParquetDataPage, data_page},
      {7, "dictionary_page_header", kParquetDictionaryPage, dictionary_page},
      {8, "data_page_header_v2", kParquetDataPageV2, data_page_v2}};
  ReadStruct(r, [&](int16_t id, uint8_t type) {
    for (const KindHeader& kind : kinds) {
      if (kind.id != id) continue;
      ExpectStruct(r, type, kind.name);
      h.has_kind_header = h.type == kind.page_type;
      ReadScalarStruct(r, kind.fields);
      return;
    }
    ReadScalarOrSkip(r, id, type, fields);
  });
  if (!r.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed page header: ", r.error()));
  }
  *header_size = r.position();
  return h;
}

}  // namespace grove
