# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True, embedsignature.format=clinic
"""Python face of the C core: batches, records, validation, Arrow columns, encoding.

C results are turned into Python objects here and nowhere else; faults
become exceptions only through ``_raise_fault``.
"""
cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t, INT32_MAX, INT64_MIN
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset
from posix.mman cimport madvise, MADV_DONTNEED
from posix.unistd cimport sysconf, _SC_PAGESIZE

cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        Py_ssize_t tp_basicsize
        PyObject *tp_dict
    void PyType_Modified(PyTypeObject *)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    void *PyUnicode_DATA(object)
    bint PyUnicode_IS_COMPACT_ASCII(object)

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
        const char *doc
    enum: T_OBJECT_EX
    enum: READONLY
    object PyDescr_NewMember(PyTypeObject *, PyMemberDef *)

from pykbatch._core cimport *

import time

from pykbatch import codecs as _codecs
from pykbatch import errors as _errors
from pykbatch.config import ValidationConfig
from pykbatch.errors import apply_handler
from pykbatch.result import Culprit, DroppedRecord, LostSpan, Repair, TruncatedTail, ValidationResult
from pykbatch._catalogue import CODEC_IDS as _COMPRESSION_IDS, CODEC_NAMES as COMPRESSION_NAMES, codec_name as _codec_name
from typing import NamedTuple as _NamedTuple
from pykbatch._catalogue import CONTROL_TYPE_NAMES as _CONTROL_TYPE_NAMES
from pykbatch._catalogue import CREATE_TIME, LOG_APPEND_TIME, TIMESTAMP_TYPES as _TIMESTAMP_TYPES, timestamp_type_name as _timestamp_type_name
from pykbatch.rules import BY_ID as _RULES_BY_ID, INDEX as _RULE_INDEX, RULES, render as _render

kb_crc32c_init()

if len(RULES) != KB_RULE_COUNT:  # two extensions built from different sources
    raise ImportError(f"pykbatch: the catalogue has {len(RULES)} rules, the native core {KB_RULE_COUNT}: rebuild")

# Buffers at least this large are processed with the GIL released.
DEF NOGIL_THRESHOLD = 16384
# Header keys remembered per record iterator, by header index (_header_key).
DEF KB_HEADER_KEY_CACHE = 8

cdef tuple _EMPTY_HEADERS = ()  # a C global: read per record without a module lookup
_DEFAULT_CONFIG = ValidationConfig()
_CODEC_RULES = frozenset(("batch.decompression_failed", "batch.decompressed_too_large"))

cdef class _Decompressor


def native_info():
    """Which native paths are live: ``{"crc32c": "sse4.2+pclmul" | "armv8-crc" | "software", ...}``.

    ``PYKBATCH_CRC32C_SW=1`` in the environment (read at import) forces the portable CRC32C.
    """
    return {
        "crc32c": kb_crc32c_impl().decode(),
        "crc32": kb_crc32_impl().decode(),
        "magics": (0, 1, 2),
        "codecs": COMPRESSION_NAMES,
        "rules": len(RULES),
    }


cdef class _View:
    """A readable, C-contiguous byte view of any buffer (bytes, bytearray,
    memoryview, mmap) that keeps its owner alive."""
    cdef readonly object obj
    cdef const uint8_t[::1] mv
    cdef const uint8_t *ptr
    cdef readonly Py_ssize_t length

    def __cinit__(self, obj):
        cdef memoryview m = obj if isinstance(obj, memoryview) else memoryview(obj)
        if m.ndim != 1 or m.format != "B":
            m = m.cast("B")
        self.obj = obj
        self.length = m.nbytes
        if self.length:
            self.mv = m
            self.ptr = &self.mv[0]
        else:
            self.ptr = <const uint8_t *> b""


cdef inline _View _view(object buf):
    return buf if isinstance(buf, _View) else _View(buf)


ctypedef uint32_t (*_crc_fn)(uint32_t crc, const uint8_t *data, size_t n) noexcept nogil


cdef uint32_t _checksum(_crc_fn fn, data, uint32_t value):
    """Runs a CRC kernel over any buffer, without the GIL on large ones."""
    cdef _View v = _view(data)
    cdef uint32_t out
    if v.length >= NOGIL_THRESHOLD:
        with nogil:
            out = fn(value, v.ptr, v.length)
    else:
        out = fn(value, v.ptr, v.length)
    return out


def crc32c(data, uint32_t value=0):
    """CRC-32C of ``data`` continuing from ``value`` (like ``crc32c.crc32c``)."""
    return _checksum(kb_crc32c, data, value)


def crc32(data, uint32_t value=0):
    """CRC-32 (IEEE, the checksum of magic 0/1 messages) of ``data`` from ``value``, like zlib.crc32."""
    return _checksum(kb_crc32, data, value)


def _crc32_sw(data, uint32_t value=0):
    """The portable CRC-32, whatever path is live (for tests)."""
    cdef _View v = _view(data)
    return kb_crc32_sw(value, v.ptr, v.length)


def _crc32c_sw(data, uint32_t value=0):
    """The portable CRC-32C, whatever path is live (for tests)."""
    cdef _View v = _view(data)
    return kb_crc32c_sw(value, v.ptr, v.length)


cdef object _fault_error(const kb_fault *f, Py_ssize_t base, Py_ssize_t payload=-1, str tp="t-0"):
    """The one place a C fault becomes an exception.  `base` is added to the fault's position;
    a fault inside decompressed records (payload >= 0) is placed at the compressed payload,
    with its position in the decompressed records in the message."""
    rule = RULES[f.rule]
    message, detail = _render(rule, (f.args[0], f.args[1], f.args[2]), tp, reader=True)
    if detail and not rule.reader_template:  # Kafka's client text already says it all
        message = f"{message} ({detail})"
    offset = <Py_ssize_t> f.pos + base
    if payload >= 0:
        message = f"{message} (at byte {f.pos} of the decompressed records)"
        offset = payload
    exc = _errors.error_for(kb_rule_code(f.rule), message, offset, rule.id)
    exc.fault_args = (f.args[0], f.args[1], f.args[2])  # the fault's values, to word it as the validator does
    return exc


cdef _raise_fault(const kb_fault *f, Py_ssize_t base, Py_ssize_t payload=-1, str tp="t-0"):
    raise _fault_error(f, base, payload, tp)


include "_batches.pxi"
include "_legacy.pxi"
include "_entries.pxi"
include "_ranges.pxi"
include "_header_table.pxi"
include "_validate.pxi"
include "_to_arrow.pxi"
include "_encode.pxi"
include "_drop_culprits.pxi"
include "_broker_rebuild.pxi"
include "_produce.pxi"
include "_produce_wire.pxi"
include "_isolation.pxi"
include "_consume.pxi"
include "_avro.pxi"
include "_shrink_guard.pxi"


# ---------------------------------------------------------------------------------------------
# Test hook for the wire primitives (the C readers are inline, so they are exercised here)

def _read_varint(data, str kind="varint"):
    """Decode one ``varint`` / ``unsigned_varint`` / ``varlong`` at the start of ``data``:
    ``(value, size)``; ValueError for a truncated or overlong encoding."""
    cdef _View v = _view(data)
    cdef int32_t i32
    cdef uint32_t u32
    cdef int64_t i64
    cdef int n
    if kind == "varint":
        n = kb_read_varint(v.ptr, v.ptr + v.length, &i32)
        value = i32
    elif kind == "unsigned_varint":
        n = kb_read_uvarint(v.ptr, v.ptr + v.length, &u32)
        value = u32
    elif kind == "varlong":
        n = kb_read_varlong(v.ptr, v.ptr + v.length, &i64)
        value = i64
    else:
        raise ValueError(f"unknown varint kind {kind!r}")
    if n == 0:
        raise ValueError("truncated varint")
    if n < 0:
        raise ValueError(f"{kind} is too long")
    return value, n
