/* The record ranges a log read keeps -- offsets [first_offset, end_offset), timestamps
 * [first_timestamp, end_timestamp) in epoch milliseconds, each side open unless its bit is set --
 * and the two rules every reader applies with them (kafka-segment's Python and JVM readers, the
 * tiered source, a fetch's first batch): whether an entry can hold records in range, read from its
 * header alone, and whether a record is in range. */
#ifndef KB_RANGES_H
#define KB_RANGES_H

#include <stdint.h>

#include "kb_decode.h"
#include "kb_kafka.h"

enum {
    KB_RANGE_FIRST_OFFSET = 1,
    KB_RANGE_END_OFFSET = 2,
    KB_RANGE_FIRST_TIMESTAMP = 4,
    KB_RANGE_END_TIMESTAMP = 8,
};

typedef struct kb_ranges {
    int bounds;  /* KB_RANGE_* bits: the sides that are set */
    int64_t first_offset, end_offset;
    int64_t first_timestamp, end_timestamp;
} kb_ranges;

/* Spark's microseconds of a millisecond bound, saturated: a bound past the type's range holds all
 * records or none. */
static inline int64_t kb_ranges_micros(int64_t millis)
{
    if (millis > INT64_MAX / 1000)
        return INT64_MAX;
    if (millis < INT64_MIN / 1000)
        return INT64_MIN;
    return millis * 1000;
}

/* Whether a record is kept.  Its timestamp is compared as the reader shows it to Spark (the
 * milliseconds times 1000, wrapping as Spark's cast does): Spark evaluates pushed WHERE clauses on
 * that value, so a range narrowed by them never drops a record they keep. */
static inline int kb_ranges_keeps_record(const kb_ranges *r, int64_t offset, int64_t timestamp_millis)
{
    if (((r->bounds & KB_RANGE_FIRST_OFFSET) && offset < r->first_offset) ||
        ((r->bounds & KB_RANGE_END_OFFSET) && offset >= r->end_offset))
        return 0;
    if (!(r->bounds & (KB_RANGE_FIRST_TIMESTAMP | KB_RANGE_END_TIMESTAMP)))
        return 1;
    int64_t micros = (int64_t)((uint64_t)timestamp_millis * 1000u);
    return !(((r->bounds & KB_RANGE_FIRST_TIMESTAMP) && micros < kb_ranges_micros(r->first_timestamp)) ||
             ((r->bounds & KB_RANGE_END_TIMESTAMP) && micros >= kb_ranges_micros(r->end_timestamp)));
}

/* Whether the complete entry `e` of buf is read: none of its records can be in range when its last
 * offset is below first_offset, its first offset at or past end_offset, or its maxTimestamp below
 * first_timestamp (a batch stores its largest timestamp, not its smallest: its records are
 * filtered one by one afterwards).  `records` 0 (one row an entry, nothing filtered after): also
 * its first timestamp (v2's baseTimestamp, a v0/v1 entry's own) must be before end_timestamp.  A
 * compressed v0/v1 wrapper's first offset is its inner set's (decompressed through `o`); a
 * compressed v1 wrapper's timestamp bounds nothing under CreateTime (its records are filtered one by
 * one); an entry whose header does not read is kept: its reader names the fault. */
int kb_ranges_keeps_entry(const kb_ranges *r, const uint8_t *buf, const kb_entry *e, int records,
                          const kb_decode_opts *o);

#endif
