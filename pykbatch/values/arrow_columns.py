"""The native decoder's columns (``_native.AvroColumns``) as Arrow arrays of the reader's layout:
the buffers are handed over, not copied (they live until the last array made of them goes)."""
from __future__ import annotations

import pyarrow as pa

from pykbatch.values.avro_program import Column, Layout


def layout_array(layout: Layout, cols) -> pa.Array:
    """The datum column: one entry a row decoded (nulls where there was no datum)."""
    out = _array(layout.root, cols)
    out.validate()
    return out


def _array(c: Column, cols) -> pa.Array:
    n, nulls, validity, data, offsets, type_ids = cols.column(c.index)
    if c.kind == "NULL":
        return pa.nulls(n)
    if c.kind == "STRUCT":
        children = [_array(m, cols) for m in c.members]
        return pa.Array.from_buffers(c.arrow, n, [validity], nulls, children=children)
    if c.kind == "LIST":
        return pa.Array.from_buffers(c.arrow, n, [validity, offsets], nulls, children=[_array(c.members[0], cols)])
    if c.kind == "UNION":
        children = [_array(m, cols) for m in c.members]
        return pa.Array.from_buffers(c.arrow, n, [None, type_ids, offsets], 0, children=children)
    if c.kind == "BINARY":
        return pa.Array.from_buffers(c.arrow, n, [validity, offsets, data], nulls)
    if isinstance(c.arrow, pa.DictionaryType):  # an enum: indices into its symbols
        indices = pa.Array.from_buffers(c.arrow.index_type, n, [validity, data], nulls)
        return pa.DictionaryArray.from_arrays(indices, pa.array(c.reader.symbols, c.arrow.value_type))
    if data is None and c.kind == "FIXED":  # a fixed of size 0: Arrow still wants a (empty) values buffer
        data = pa.py_buffer(b"")
    return pa.Array.from_buffers(c.arrow, n, [validity, data], nulls)
