package io.pykbatch.spark;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column of kafka-segment's window read in place from the core's Arrow buffers (kb_columns: fixed
 * width arrays, validity bitmaps, int32 offsets and data): no copy between the core and Spark.  The
 * addresses are the window's (SegmentWindow.at), refreshed for each window; a column never outlives
 * its reader, which owns the memory.
 */
abstract class NativeColumn extends ColumnVector {
    final SegmentWindow window;

    NativeColumn(DataType type, SegmentWindow window) {
        super(type);
        this.window = window;
    }

    static boolean bit(long bitmap, int row) {
        return (Platform.getByte(null, bitmap + (row >>> 3)) & (1 << (row & 7))) != 0;
    }

    @Override public void close() { }
    @Override public boolean hasNull() { return false; }
    @Override public int numNulls() { return 0; }
    @Override public boolean isNullAt(int rowId) { return false; }
    @Override public boolean getBoolean(int rowId) { throw unsupported(); }
    @Override public byte getByte(int rowId) { throw unsupported(); }
    @Override public short getShort(int rowId) { throw unsupported(); }
    @Override public int getInt(int rowId) { throw unsupported(); }
    @Override public long getLong(int rowId) { throw unsupported(); }
    @Override public float getFloat(int rowId) { throw unsupported(); }
    @Override public double getDouble(int rowId) { throw unsupported(); }
    @Override public ColumnarArray getArray(int rowId) { throw unsupported(); }
    @Override public ColumnarMap getMap(int ordinal) { throw unsupported(); }
    @Override public Decimal getDecimal(int rowId, int precision, int scale) { throw unsupported(); }
    @Override public UTF8String getUTF8String(int rowId) { throw unsupported(); }
    @Override public byte[] getBinary(int rowId) { throw unsupported(); }
    @Override public ColumnVector getChild(int ordinal) { throw unsupported(); }

    private UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException("kafka-segment: no such read of a " + dataType().simpleString()
            + " column");
    }

    /** int64 / timestamp (microseconds) values. */
    static final class Longs extends NativeColumn {
        private final int slot;
        Longs(DataType type, SegmentWindow window, int slot) { super(type, window); this.slot = slot; }
        @Override public long getLong(int rowId) { return Platform.getLong(null, window.at[slot] + 8L * rowId); }
    }

    static final class Ints extends NativeColumn {
        private final int slot;
        Ints(DataType type, SegmentWindow window, int slot) { super(type, window); this.slot = slot; }
        @Override public int getInt(int rowId) { return Platform.getInt(null, window.at[slot] + 4L * rowId); }
    }

    static final class Shorts extends NativeColumn {
        private final int slot;
        Shorts(DataType type, SegmentWindow window, int slot) { super(type, window); this.slot = slot; }
        @Override public short getShort(int rowId) { return Platform.getShort(null, window.at[slot] + 2L * rowId); }
    }

    /** Arrow booleans: one bit a row. */
    static final class Flags extends NativeColumn {
        private final int slot;
        Flags(DataType type, SegmentWindow window, int slot) { super(type, window); this.slot = slot; }
        @Override public boolean getBoolean(int rowId) { return bit(window.at[slot], rowId); }
    }

    /** Arrow binary / utf8: validity (slot -1: never null), int32 offsets, data. */
    static final class Bytes extends NativeColumn {
        private final int rows, valid, offsets, data;
        Bytes(DataType type, SegmentWindow window, int rows, int valid, int offsets, int data) {
            super(type, window);
            this.rows = rows;
            this.valid = valid;
            this.offsets = offsets;
            this.data = data;
        }
        @Override public boolean hasNull() { return valid >= 0; }
        @Override public int numNulls() {
            int n = 0;
            for (long r = 0; r < window.at[rows]; r++) {
                n += isNullAt((int) r) ? 1 : 0;
            }
            return n;
        }
        @Override public boolean isNullAt(int rowId) { return valid >= 0 && !bit(window.at[valid], rowId); }
        private int start(int rowId) { return Platform.getInt(null, window.at[offsets] + 4L * rowId); }
        private int end(int rowId) { return Platform.getInt(null, window.at[offsets] + 4L * rowId + 4); }
        @Override public UTF8String getUTF8String(int rowId) {
            if (isNullAt(rowId)) {
                return null;
            }
            int start = start(rowId);
            return UTF8String.fromAddress(null, window.at[data] + start, end(rowId) - start);
        }
        @Override public byte[] getBinary(int rowId) {
            if (isNullAt(rowId)) {
                return null;
            }
            int start = start(rowId);
            byte[] out = new byte[end(rowId) - start];
            Platform.copyMemory(null, window.at[data] + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
            return out;
        }
    }

    /** One value for the whole split: topic, partition, segment, path. */
    static final class Constant extends NativeColumn {
        private final Object value;
        Constant(DataType type, SegmentWindow window, Object value) { super(type, window); this.value = value; }
        @Override public int getInt(int rowId) { return (Integer) value; }
        @Override public long getLong(int rowId) { return (Long) value; }
        @Override public UTF8String getUTF8String(int rowId) { return (UTF8String) value; }
    }

    /** batches mode: one field of the window's entry headers (BatchInfoFunction's slots, its values). */
    static final class Header extends NativeColumn {
        private final String name;
        private final int slot;
        Header(DataType type, SegmentWindow window, String name) {
            super(type, window);
            this.name = name;
            this.slot = BatchInfoFunction.slot(name);
        }
        private Object of(int rowId) {
            int at = window.entryOf[rowId] * BatchInfoFunction.WIDTH;
            return BatchInfoFunction.value(name, dataType(), window.headers[at + slot], window.headers[at + 2]);
        }
        @Override public boolean hasNull() { return name.equals("record_count"); }
        @Override public int numNulls() {
            int n = 0;
            for (int r = 0; hasNull() && r < window.entryOf.length; r++) {
                n += of(r) == null ? 1 : 0;
            }
            return n;
        }
        @Override public boolean isNullAt(int rowId) { return hasNull() && of(rowId) == null; }
        @Override public boolean getBoolean(int rowId) { return (Boolean) of(rowId); }
        @Override public byte getByte(int rowId) { return (Byte) of(rowId); }
        @Override public short getShort(int rowId) { return (Short) of(rowId); }
        @Override public int getInt(int rowId) { return (Integer) of(rowId); }
        @Override public long getLong(int rowId) { return (Long) of(rowId); }
        @Override public UTF8String getUTF8String(int rowId) { return (UTF8String) of(rowId); }
    }

    /** leader_epoch of a tiered read: the lineage's epoch of each row's offset (the offsets column
     * given: a record's, or a batch's base offset), -1 before its first entry (tiered.tables.epoch_column). */
    static final class Epoch extends NativeColumn {
        private final ColumnVector offsets;
        private final long[] starts;  // ascending start offsets
        private final int[] epochs;
        Epoch(DataType type, SegmentWindow window, ColumnVector offsets, long[] starts, int[] epochs) {
            super(type, window);
            this.offsets = offsets;
            this.starts = starts;
            this.epochs = epochs;
        }
        @Override public int getInt(int rowId) {
            long offset = offsets.getLong(rowId);
            int lo = 0, hi = starts.length;  // the first start above the offset
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (starts[mid] <= offset) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            return lo == 0 ? -1 : epochs[lo - 1];
        }
    }

    /** headers: array<struct<key: string, value: binary>> over the header offsets of each row. */
    static final class Headers extends NativeColumn {
        private final ColumnVector struct;
        Headers(DataType type, SegmentWindow window, ColumnVector struct) { super(type, window); this.struct = struct; }
        @Override public ColumnarArray getArray(int rowId) {
            long at = window.at[SegmentWindow.HEADER_OFFSETS] + 4L * rowId;
            int start = Platform.getInt(null, at);
            return new ColumnarArray(struct, start, Platform.getInt(null, at + 4) - start);
        }
        @Override public ColumnVector getChild(int ordinal) { return struct; }
    }

    /** The struct of one header: its key and value columns. */
    static final class Struct extends NativeColumn {
        private final ColumnVector[] children;
        Struct(DataType type, SegmentWindow window, ColumnVector... children) {
            super(type, window);
            this.children = children;
        }
        @Override public ColumnVector getChild(int ordinal) { return children[ordinal]; }
    }

    /** A record's batch's verdict (in batches mode the row's own): OK (batch_ok), MESSAGE
     * (batch_error), RULE (error_rule) or CODE (error_code) of its first culprit; null when it passed. */
    static final class Verdict extends NativeColumn {
        static final int OK = 0, MESSAGE = 1, RULE = 2, CODE = 3;
        private final int kind;
        Verdict(DataType type, SegmentWindow window, int kind) { super(type, window); this.kind = kind; }
        private int entry(int rowId) {
            return window.entryOf != null ? window.entryOf[rowId]
                : Platform.getInt(null, window.at[SegmentWindow.BATCH_INDEX] + 4L * rowId);
        }
        private boolean passed(int rowId) { return window.verdicts[entry(rowId)] == null; }
        @Override public boolean hasNull() { return kind != OK; }
        @Override public int numNulls() {
            int n = 0;
            for (int r = 0; kind != OK && r < window.rows(); r++) {
                n += passed(r) ? 1 : 0;
            }
            return n;
        }
        @Override public boolean isNullAt(int rowId) { return kind != OK && passed(rowId); }
        @Override public boolean getBoolean(int rowId) { return passed(rowId); }
        @Override public short getShort(int rowId) { return window.codes[entry(rowId)]; }
        @Override public UTF8String getUTF8String(int rowId) {
            return kind == RULE ? window.rules[entry(rowId)] : window.verdicts[entry(rowId)];
        }
    }

    /** A column every row of a window leaves null (a record's row has nothing lost). */
    static final class Nulls extends NativeColumn {
        Nulls(DataType type, SegmentWindow window) { super(type, window); }
        @Override public boolean hasNull() { return true; }
        @Override public int numNulls() { return window.rows(); }
        @Override public boolean isNullAt(int rowId) { return true; }
    }
}
