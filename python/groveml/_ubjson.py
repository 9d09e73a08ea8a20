"""A reader of XGBoost's UBJSON model files (Universal Binary JSON, draft 12, as XGBoost writes
them: big-endian numbers, optimized containers with `$` type and `#` count), so that a .ubj model
gives its category names as its .json twin does (_categories.py). Typed numeric arrays come back as
numpy arrays (a model's node arrays are large); everything else as Python values.

The bytes may come from anywhere (a model repository): every length and count is checked against
the bytes left, nesting is bounded, and anything malformed raises ValueError -- never another
exception, never a read past the end (tests/python/model_test.py mutates real files to check it).
"""

import struct

import numpy as np

_MAX_DEPTH = 64
_INTS = {b"i": (">i1", 1), b"U": (">u1", 1), b"I": (">i2", 2), b"l": (">i4", 4), b"L": (">i8", 8)}
_FLOATS = {b"d": (">f4", 4), b"D": (">f8", 8)}
_NUMBERS = {**_INTS, **_FLOATS}


class _Reader:
    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"UBJSON: {n} bytes wanted at offset {self.pos}, "
                             f"{len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def marker(self) -> bytes:
        while True:
            m = bytes(self.take(1))
            if m != b"N":  # no-op
                return m

    def number(self, m: bytes):
        dtype, size = _NUMBERS[m]
        v = np.frombuffer(self.take(size), dtype=dtype)[0]
        return int(v) if m in _INTS else float(v)

    def length(self) -> int:
        m = self.marker()
        if m not in _INTS:
            raise ValueError(f"UBJSON: a length must be an integer, not {m!r} (offset {self.pos})")
        n = self.number(m)
        if n < 0:
            raise ValueError(f"UBJSON: negative length {n} at offset {self.pos}")
        return n

    def string(self) -> str:
        return bytes(self.take(self.length())).decode("utf-8", "replace")

    def value(self, m: bytes, depth: int):
        if depth > _MAX_DEPTH:
            raise ValueError(f"UBJSON: nested deeper than {_MAX_DEPTH} containers")
        if m in _NUMBERS:
            return self.number(m)
        if m == b"S" or m == b"H":
            return self.string()
        if m == b"C":
            return bytes(self.take(1)).decode("latin-1")
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        if m == b"[":
            return self.array(depth)
        if m == b"{":
            return self.object(depth)
        raise ValueError(f"UBJSON: unknown marker {m!r} at offset {self.pos - 1}")

    def container_header(self):
        """The optional `$type` and `#count` of a container: (type or None, count or None)."""
        kind = count = None
        m = self.marker()
        if m == b"$":
            kind = self.marker()
            m = self.marker()
            if m != b"#":
                raise ValueError(f"UBJSON: a typed container needs a count (offset {self.pos})")
        if m == b"#":
            count = self.length()
            return kind, count, None
        return kind, count, m  # m: the first element's marker (or the closing one)

    def array(self, depth: int):
        kind, count, first = self.container_header()
        if count is not None:
            if kind in _NUMBERS:
                dtype, size = _NUMBERS[kind]
                return np.frombuffer(self.take(count * size), dtype=dtype)
            if count > len(self.data) - self.pos and kind not in (b"Z", b"T", b"F"):
                raise ValueError(f"UBJSON: {count} elements cannot fit {len(self.data) - self.pos} bytes")
            if kind is not None and count > len(self.data):
                raise ValueError(f"UBJSON: {count} valueless elements")
            return [self.value(kind or self.marker(), depth + 1) for _ in range(count)]
        out, m = [], first
        while m != b"]":
            out.append(self.value(m, depth + 1))
            m = self.marker()
        return out

    def object(self, depth: int):
        kind, count, first = self.container_header()
        out = {}
        if count is not None:
            if count > len(self.data) - self.pos:
                raise ValueError(f"UBJSON: {count} members cannot fit {len(self.data) - self.pos} bytes")
            for _ in range(count):
                key = self.string()
                out[key] = self.value(kind or self.marker(), depth + 1)
            return out
        m = first
        while m != b"}":
            self.pos -= 1  # the key's length marker, read as a marker above
            key = self.string()
            out[key] = self.value(self.marker(), depth + 1)
            m = self.marker()
        return out


def loads(data: bytes):
    """The document in `data` (ValueError when malformed)."""
    r = _Reader(data)
    try:
        return r.value(r.marker(), 0)
    except (KeyError, struct.error, UnicodeDecodeError, OverflowError, MemoryError) as e:
        raise ValueError(f"UBJSON: malformed at offset {r.pos}: {e}") from None
