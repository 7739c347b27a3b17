/* Spark's UnsafeRow written from the core's Avro columns: a record of flat fields (numbers,
 * booleans, strings, bytes, fixed, decimals of up to 18 digits, timestamps) as the one byte array
 * Spark reads in place, so kbatch_from_avro's JVM function hands Spark a row made in one step.
 * Plain C (no jni.h): the shim calls it. */
#ifndef KB_UNSAFE_ROW_H
#define KB_UNSAFE_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "kb_avro.h"

/* How a column's value becomes Spark's (spark_udfs/jvm_avro.py CONVERSIONS, AvroDecoder.java). */
enum { KB_CONV_PLAIN = 0, KB_CONV_STRING = 1, KB_CONV_ENUM = 2, KB_CONV_MILLIS_TO_MICROS = 3,
       KB_CONV_NANOS_TO_MICROS = 4, KB_CONV_MICROS_TO_NANOS = 5, KB_CONV_MAP = 6, KB_CONV_SCALED = 7 };

/* Whether the root of `c` is a record whose fields kb_unsafe_row writes (`conversions`: two ints
 * a column, the code and its argument). */
int kb_unsafe_row_fits(const kb_avro_columns *c, const int32_t *conversions);

/* The bytes of the root record's entry 0 as an UnsafeRow into *buf (grown as needed; *cap its
 * size): the row's size, or -1 without memory. */
int64_t kb_unsafe_row_write(const kb_avro_columns *c, const int32_t *conversions, uint8_t **buf, size_t *cap);

#endif
