#!/usr/bin/env python3
"""Writes the Parquet test files of Grove's Parquet reader (core/io/parquet.h) and, beside each
readable one, the same table as CSV with a header, as the CLI's CSV path reads it:

  types_<codec>_<dict|plain>_<v1|v2>.parquet/.csv   the demo model's features f0..f7 (examples/
      models/demo) as every type the reader takes: BOOLEAN, INT8, INT16 (nulls), UINT32, INT64
      (beyond 2^53), numbers as strings, FLOAT (nulls), DOUBLE (nulls and NaN); an "id" string
      (--keep), a TIMESTAMP and a DECIMAL nobody reads; several row groups and pages; codecs
      UNCOMPRESSED, SNAPPY, GZIP and ZSTD; dictionary or PLAIN (RLE booleans) pages, v1 or v2;
      types_none_dict_v1 in the legacy format 1.0 (converted types, PLAIN_DICTIONARY).
  cats_<codec>_<dict|plain>_<v1|v2>.parquet/.csv    tests/model/data/categories' features: city
      (category names, nulls, a non-ASCII one as XGBoost records it), x (DOUBLE), size (INT64 category values)
  refused_<what>.parquet   a nested (struct) f3, a DECIMAL f2, LZ4 pages, DELTA_BINARY_PACKED
      values: each refused naming the column

Deterministic for a pyarrow version (26 wrote the committed files): python3
scripts/make_parquet_corpus.py [OUT_DIR] (default tests/common/data/parquet).
"""
import decimal
import math
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/common/data/parquet")
CODECS = ["none", "snappy", "gzip", "zstd"]
ROWS = 200


def csv_cell(v, arrow_type):
    """The CSV text of a value: exact (a float32 widened exactly, as numpy widens it)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def write_csv(table, path, columns):
    data = {c: table.column(c).to_pylist() for c in columns}
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(",".join(columns) + "\n")
        for r in range(table.num_rows):
            f.write(",".join(csv_cell(data[c][r], table.schema.field(c).type) for c in columns) + "\n")


def with_nulls(rng, values, share):
    return [None if rng.random() < share else v for v in values]


def types_table():
    rng = np.random.default_rng(11)
    n = ROWS
    f7 = [float(v) for v in rng.normal(0.5, 2.0, n)]
    for i in range(0, n, 17):
        f7[i] = float("nan")
    return pa.table({
        "f7": pa.array(with_nulls(rng, f7, 0.1), pa.float64()),
        "id": pa.array([f"row{i}" for i in range(n)], pa.string()),
        "f0": pa.array(with_nulls(rng, [bool(b) for b in rng.integers(0, 2, n)], 0.1), pa.bool_()),
        "f1": pa.array([int(v) for v in rng.integers(-128, 128, n)], pa.int8()),
        "f2": pa.array(with_nulls(rng, [int(v) for v in rng.integers(-3, 4, n)], 0.2), pa.int16()),
        "f3": pa.array([int(v) for v in rng.integers(0, 2**32, n, dtype=np.uint64)], pa.uint32()),
        "f4": pa.array([int(v) * 1000003 for v in rng.integers(-2**40, 2**40, n)], pa.int64()),
        "f5": pa.array(with_nulls(rng, [repr(float(v)) for v in np.round(rng.normal(0, 3, n), 3)]
                                  + [], 0.1), pa.string()),
        "f6": pa.array(with_nulls(rng, [float(np.float32(v)) for v in rng.normal(0.5, 1.0, n)], 0.15),
                       pa.float32()),
        "when": pa.array(np.arange(n).astype("datetime64[s]"), pa.timestamp("s")),
        "price": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
    })


def cats_table():
    rng = np.random.default_rng(13)
    n = ROWS
    # "orl\u00e9an": XGBoost 3.2 records "orl\u00e9ans" so cut (docs/formats.md); LightGBM, which
    # records the whole name, finds no such category and reads a missing value.
    cities = ["paris", "brest", "lyon", "orl\u00e9an"]
    return pa.table({
        "id": pa.array([f"c{i}" for i in range(n)], pa.string()),
        "size": pa.array(with_nulls(rng, [int(v) for v in rng.choice([3, 10, 42], n)], 0.1),
                         pa.int64()),
        "x": pa.array([float(v) for v in rng.normal(size=n)], pa.float64()),
        "city": pa.array(with_nulls(rng, [str(c) for c in rng.choice(cities, n)], 0.1),
                         pa.string()),
    })


def write(table, name, codec, dictionary, version, csv_columns, **extra):
    path = os.path.join(OUT, name + ".parquet")
    options = dict(compression=codec, use_dictionary=dictionary, data_page_version=version,
                   row_group_size=64, data_page_size=256, write_statistics=False)
    if "format_version" in extra:
        options["version"] = extra.pop("format_version")
    options.update(extra)
    pq.write_table(table, path, **options)
    if csv_columns:
        write_csv(table, os.path.join(OUT, name + ".csv"), csv_columns)


def main():
    os.makedirs(OUT, exist_ok=True)
    types = types_table()
    cats = cats_table()
    type_columns = ["id"] + [f"f{i}" for i in range(8)]
    for i, codec in enumerate(CODECS):
        for dictionary in (True, False):
            version = "1.0" if dictionary == (i % 2 == 0) else "2.0"
            v = "v1" if version == "1.0" else "v2"
            kind = "dict" if dictionary else "plain"
            extra = {} if dictionary else {"column_encoding": {"f0": "RLE"}}
            if codec == "none" and dictionary:
                extra["format_version"] = "1.0"  # the legacy format: converted types, PLAIN_DICTIONARY
            write(types, f"types_{codec}_{kind}_{v}", codec, dictionary, version, type_columns,
                  **extra)
        write(cats, f"cats_{codec}_{'dict' if i % 2 == 0 else 'plain'}_{'v1' if i < 2 else 'v2'}",
              codec, i % 2 == 0, "1.0" if i < 2 else "2.0", ["id", "size", "x", "city"])
    nested = types.set_column(types.schema.get_field_index("f3"), "f3",
                              pa.StructArray.from_arrays([types.column("f3").combine_chunks()],
                                                         ["inner"]))
    write(nested, "refused_nested", "snappy", True, "1.0", None)
    decimal_f2 = types.set_column(types.schema.get_field_index("f2"), "f2",
                                  pa.array([decimal.Decimal(i) for i in range(ROWS)],
                                           pa.decimal128(9, 0)))
    write(decimal_f2, "refused_decimal", "snappy", True, "1.0", None)
    write(types, "refused_lz4", "lz4", True, "1.0", None)
    write(types, "refused_delta", "none", False, "2.0", None,
          column_encoding={"f4": "DELTA_BINARY_PACKED"})


if __name__ == "__main__":
    main()
