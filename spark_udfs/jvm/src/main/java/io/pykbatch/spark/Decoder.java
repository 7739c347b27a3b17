package io.pykbatch.spark;

import java.lang.ref.Cleaner;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * kbatch_decode of one row: the core decodes its entries (kb_decode_row: the readers' walk, every
 * codec called back in Java) into its columns, which are read in place into Spark's values, field
 * for field the RECORD struct the Python function gives (pykbatch.arrow.RECORD).  One decoder per
 * thread; its native memory is freed when it is dropped.
 */
final class Decoder {
    private static final Cleaner CLEANER = Cleaner.create();
    private static final UTF8String[] TIMESTAMP_TYPES = {
        UTF8String.fromString(Native.timestampTypeName(0)), UTF8String.fromString(Native.timestampTypeName(1)),
        UTF8String.fromString(Native.timestampTypeName(2))};
    private static final ThreadLocal<Decoder> BY_THREAD = ThreadLocal.withInitial(Decoder::new);

    private final SegmentWindow columns = new SegmentWindow();
    private final Decompressor codecs = new Decompressor();
    private final long handle;
    private StructType readersOf;   // the record type `readers` were chosen for
    private FieldReader[] readers;

    private Decoder() {
        long h = Native.decoderOpen(true, Long.parseLong(Options.DEFAULTS.getProperty("default.max_decompressed_bytes")),
            codecs, columns.buffer);
        if (h == 0) {
            throw new OutOfMemoryError("kbatch: no memory for a decoder");
        }
        handle = h;
        CLEANER.register(this, () -> Native.decoderClose(h));
    }

    static Decoder get() {
        return BY_THREAD.get();
    }

    /** The records of row[off, off + len) as an array of `record` structs, or null when the row does
     * not decode cleanly. */
    ArrayData decode(byte[] row, int off, int len, StructType record) {
        int n = Native.decodeRow(handle, row, off, len);
        codecs.messages.clear();
        if (n == -2) {
            throw new IllegalStateException("kbatch: the core refused a row");  // an exception is pending
        }
        if (n < 0) {
            return null;
        }
        columns.refresh();
        long[] at = columns.at;
        if (record != readersOf) {  // each field's reader chosen once, not once a value
            StructField[] fields = record.fields();
            readers = new FieldReader[fields.length];
            for (int i = 0; i < fields.length; i++) {
                readers[i] = reader(fields[i]);
            }
            readersOf = record;
        }
        Object[] out = new Object[n];
        for (int r = 0; r < n; r++) {
            Object[] values = new Object[readers.length];
            for (int i = 0; i < readers.length; i++) {
                values[i] = readers[i].read(at, r);
            }
            out[r] = new GenericInternalRow(values);
        }
        return new GenericArrayData(out);
    }

    /** The entry headers of row[off, off + len) (kb_entry_info_next's walk): BatchInfo.WIDTH longs each. */
    long[] batchInfo(byte[] row, int off, int len) {
        long[] out = Native.batchInfo(handle, row, off, len);
        codecs.messages.clear();
        if (out == null) {
            throw new IllegalStateException("kbatch: the core refused a row");  // an exception is pending
        }
        return out;
    }

    private interface FieldReader {
        Object read(long[] at, int r);
    }

    private static FieldReader reader(StructField field) {
        switch (field.name()) {
            case "offset": return (at, r) -> Platform.getLong(null, at[SegmentWindow.OFFSET] + 8L * r);
            case "timestamp": return (at, r) -> Platform.getLong(null, at[SegmentWindow.TIMESTAMP] + 8L * r);
            case "key":
                return (at, r) -> bytes(at, SegmentWindow.KEY_VALID, SegmentWindow.KEY_OFFSETS, SegmentWindow.KEY_DATA, r);
            case "value":
                return (at, r) -> bytes(at, SegmentWindow.VALUE_VALID, SegmentWindow.VALUE_OFFSETS,
                    SegmentWindow.VALUE_DATA, r);
            case "headers": {
                StructType header = (StructType) ((ArrayType) field.dataType()).elementType();
                return (at, r) -> headers(at, r, header);
            }
            case "sequence": return (at, r) -> Platform.getInt(null, at[SegmentWindow.SEQUENCE] + 4L * r);
            case "batch_index": return (at, r) -> Platform.getInt(null, at[SegmentWindow.BATCH_INDEX] + 4L * r);
            case "batch_position":
                return (at, r) -> Platform.getLong(null, at[SegmentWindow.BATCH_POSITION] + 8L * r);
            case "base_offset": return (at, r) -> Platform.getLong(null, at[SegmentWindow.BASE_OFFSET] + 8L * r);
            case "partition_leader_epoch":
                return (at, r) -> Platform.getInt(null, at[SegmentWindow.LEADER_EPOCH] + 4L * r);
            case "producer_id": return (at, r) -> Platform.getLong(null, at[SegmentWindow.PRODUCER_ID] + 8L * r);
            case "producer_epoch":
                return (at, r) -> Platform.getShort(null, at[SegmentWindow.PRODUCER_EPOCH] + 2L * r);
            case "is_transactional": return (at, r) -> NativeColumn.bit(at[SegmentWindow.IS_TRANSACTIONAL], r);
            case "is_control": return (at, r) -> NativeColumn.bit(at[SegmentWindow.IS_CONTROL], r);
            case "timestamp_type":
                return (at, r) -> TIMESTAMP_TYPES[Platform.getByte(null, at[SegmentWindow.TIMESTAMP_TYPE_INDEX] + r)];
            default:
                throw new IllegalStateException("kbatch_decode on the JVM has no field " + field.name());
        }
    }

    /** A binary value copied out (null where the validity bit is clear; valid < 0: never null). */
    private static byte[] bytes(long[] at, int valid, int offsets, int data, int r) {
        if (valid >= 0 && !NativeColumn.bit(at[valid], r)) {
            return null;
        }
        int start = Platform.getInt(null, at[offsets] + 4L * r);
        byte[] out = new byte[Platform.getInt(null, at[offsets] + 4L * r + 4) - start];
        Platform.copyMemory(null, at[data] + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
        return out;
    }

    private static ArrayData headers(long[] at, int r, StructType header) {
        int first = Platform.getInt(null, at[SegmentWindow.HEADER_OFFSETS] + 4L * r);
        int end = Platform.getInt(null, at[SegmentWindow.HEADER_OFFSETS] + 4L * r + 4);
        Object[] out = new Object[end - first];
        for (int h = first; h < end; h++) {
            byte[] key = bytes(at, -1, SegmentWindow.HKEY_OFFSETS, SegmentWindow.HKEY_DATA, h);
            byte[] value = bytes(at, SegmentWindow.HVALUE_VALID, SegmentWindow.HVALUE_OFFSETS, SegmentWindow.HVALUE_DATA, h);
            out[h - first] = new GenericInternalRow(new Object[] {UTF8String.fromBytes(key), value});
        }
        return new GenericArrayData(out);
    }
}
