/* Avro binary data -> Arrow columns, by a program compiled once per (writer schema, reader schema).
 *
 * pykbatch/values/avro_program.py parses both schemas, applies Avro's resolution rules (fields
 * matched by name or alias, promotions, defaults for fields the writer lacks, enum symbols and
 * union branches mapped) and flattens the result into the tables below: `nodes` say what the
 * writer wrote and which column it goes to, `columns` the Arrow arrays (a tree: a struct's
 * fields, a list's item, a union's members).  The decoder walks the nodes once per datum and
 * appends to the columns; no per-datum allocation beyond the columns' doubling, no recursion
 * deeper than the schema.  A datum that fails (truncated, an index out of range, a branch the
 * reader cannot take) is rolled back in every column and reported with its rule and byte. */
#ifndef KB_AVRO_H
#define KB_AVRO_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

/* What the writer wrote at a node (Avro's binary encoding), and two nodes of the resolution. */
typedef enum {
    KB_AVRO_NULL = 0,    /* nothing; into a non-null column: a null */
    KB_AVRO_BOOLEAN,
    KB_AVRO_INT,         /* zigzag varint; into an INT64/FLOAT/DOUBLE column: promoted */
    KB_AVRO_LONG,
    KB_AVRO_FLOAT,       /* 4 bytes little-endian */
    KB_AVRO_DOUBLE,
    KB_AVRO_BYTES,       /* long length + bytes */
    KB_AVRO_STRING,      /* the same, UTF-8 checked */
    KB_AVRO_FIXED,       /* `count` bytes */
    KB_AVRO_ENUM,        /* int index; `table[aux + index]` the reader's index, -1: no such symbol */
    KB_AVRO_RECORD,      /* `count` fields in the writer's order: `children[child..]` */
    KB_AVRO_ARRAY,       /* blocks of items: node `child` */
    KB_AVRO_MAP,         /* blocks of (string key, value node `child`) */
    KB_AVRO_UNION,       /* long index among `count` branches: `children[child + index]` */
    KB_AVRO_BRANCH,      /* a reader union's member: type id `count` into union column `col`, then
                          * node `child` */
    KB_AVRO_DEFAULT,     /* a reader field the writer lacks: `defaults[aux]` (its default, encoded
                          * with the reader's schema) read by node `child` */
    KB_AVRO_MISMATCH,    /* a writer branch the reader cannot take: fault, reason `aux` */
    KB_AVRO_DECIMAL_BYTES, /* bytes: big-endian two's complement into a DECIMAL column */
    KB_AVRO_DECIMAL_FIXED, /* fixed(count): the same */
} kb_avro_op;

/* The Arrow array a column is. */
typedef enum {
    KB_COL_NULL = 0,     /* Arrow null: a length only */
    KB_COL_BOOL,         /* bitmap */
    KB_COL_INT32,        /* also date32, time32, an enum's dictionary indices */
    KB_COL_INT64,        /* also timestamps, time64 */
    KB_COL_FLOAT32,
    KB_COL_FLOAT64,
    KB_COL_BINARY,       /* int32 offsets + data: binary and utf8 */
    KB_COL_FIXED,        /* `width` bytes a value */
    KB_COL_DECIMAL,      /* `width` (16 or 32) bytes, little-endian two's complement */
    KB_COL_STRUCT,       /* `count` member columns from `column_children[child]` */
    KB_COL_LIST,         /* int32 offsets; item column `child` (a map: a list of key/value structs) */
    KB_COL_UNION,        /* dense union: int8 type ids + int32 offsets; members as a struct's */
} kb_col_kind;

typedef struct {
    int32_t op;        /* kb_avro_op */
    int32_t col;       /* the column written; -1: read and dropped (a writer field the reader lacks) */
    int32_t child;
    int32_t count;
    int32_t aux;
    int32_t min_bytes; /* the fewest bytes a datum of this node takes (bounds a collection's count) */
} kb_avro_node;

typedef struct {
    int32_t kind;      /* kb_col_kind */
    int32_t width;     /* FIXED / DECIMAL bytes */
    int32_t child;     /* STRUCT / UNION: first member in column_children; LIST: the item column */
    int32_t count;     /* STRUCT / UNION members; DECIMAL: the precision (digits); INT32 / INT64: 1 a
                        * time of day (time-millis / time-micros: values in [0, one day)) */
} kb_avro_colspec;

typedef struct {
    const kb_avro_node *nodes;
    const int32_t *children;        /* node indices */
    const int32_t *table;           /* enum symbol maps */
    const uint8_t *defaults;        /* the defaults' Avro encodings, back to back */
    const int64_t *default_spans;   /* default i: defaults[spans[2i], spans[2i] + spans[2i+1]) */
    int32_t root;                   /* the datum's node */
    int32_t n_nodes, n_children, n_table, n_defaults;
    int64_t n_default_bytes;
} kb_avro_program;

/* One Arrow array being built.  Bitmaps and offsets follow Arrow's layout; `length` counts
 * entries, `bytes` the data buffer's use (BINARY) . */
typedef struct {
    uint8_t *valid;
    uint8_t *data;     /* values (fixed width) or bytes (BINARY) */
    int32_t *offsets;  /* BINARY, LIST, UNION (one slot a value; BINARY/LIST: length + 1 slots) */
    int8_t *type_ids;  /* UNION */
    int64_t length, nulls, bytes;
    int64_t cap, data_cap; /* entries / data bytes there is room for */
} kb_avro_column;

typedef struct {
    const kb_avro_colspec *specs;
    const int32_t *column_children;
    int32_t n_columns, root;        /* root: the datum's column (a record: a STRUCT) */
    kb_avro_column *cols;
    int64_t *saved;                 /* per column: length, nulls, bytes at the datum's start */
} kb_avro_columns;

/* Results beyond the faults of kb_rules.def. */
#define KB_AVRO_NO_MEMORY (-2)
#define KB_AVRO_TOO_LARGE (-3)     /* a column past 2^31 - 1 entries or bytes */

/* Limits on hostile counts: a collection of items that take no bytes (nulls, empty records) is
 * bounded by this many items in one datum, not by the bytes left. */
#define KB_AVRO_MAX_EMPTY_ITEMS (1 << 20)

/* Checks that a program's indices stay inside its tables and its nodes write columns of a kind
 * they can fill, that the node graph has no cycle, and that every column's members exist:
 * 0, or -1 with the index of the first bad node (or column, as -2 - index) in *where. */
int kb_avro_check(const kb_avro_program *p, const kb_avro_columns *c, int32_t *where);

/* Allocates the columns' state for `rows_hint` datums.  0 or KB_AVRO_NO_MEMORY. */
int kb_avro_columns_init(kb_avro_columns *c, int64_t rows_hint);
void kb_avro_columns_free(kb_avro_columns *c);

/* Decodes one datum, data[start, len), with program p, appending one entry to the root column.
 * 0; -1 with the fault (rule, byte in data, args); KB_AVRO_NO_MEMORY; KB_AVRO_TOO_LARGE.  On
 * failure every column is as before the call.  Fault positions count from data[0] (the value,
 * framing included).  A datum followed by more bytes is a fault
 * (value.trailing_bytes) unless allow_trailing. */
int kb_avro_decode(const kb_avro_program *p, kb_avro_columns *c, const uint8_t *data, size_t start, size_t len,
                   int allow_trailing, kb_fault *f);

/* Empties every column, keeping its buffers (a host decoding one datum at a time). */
void kb_avro_columns_reset(kb_avro_columns *c);

/* Appends a null to the root column (a row with no datum: a null value or a culprit). */
int kb_avro_append_null(kb_avro_columns *c);

/* The schema registries' wire formats in front of a datum. */
typedef enum {
    KB_FRAMING_CONFLUENT = 0,          /* magic 0, int32 schema id (big-endian) */
    KB_FRAMING_CONFLUENT_PROTOBUF = 1, /* the same, then the message-index array */
    KB_FRAMING_GLUE = 2,               /* version 3, compression byte, 16-byte schema version UUID */
} kb_framing;

typedef struct {
    int64_t schema_id;        /* Confluent: the id; Glue: unused (the UUID is at byte 2) */
    int32_t payload;          /* where the datum starts */
    int32_t index_count;      /* Protobuf: how many message indexes (the [0] shortcut: 1) */
    int32_t compression;      /* Glue: 0 none, 5 zlib */
} kb_frame;

#define KB_FRAME_MAX_INDEXES 64 /* Protobuf message nesting deeper than this is refused */

/* Reads the framing of one value; Protobuf's message indexes into indexes[0, max) (the `[0]`
 * shortcut -- a count of 0 -- as the one index 0).  0, or -1 with the fault
 * (value.schema_framing, value.header_truncated, value.message_index). */
int kb_read_frame(const uint8_t *data, size_t len, kb_framing framing, kb_frame *out, int32_t *indexes,
                  int32_t max_indexes, kb_fault *f);

#endif
