package io.pykbatch.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rows of what a validated kafka-segment read cannot deliver (spark_udfs.segment_columns.lost_rows
 * on the Python path): one row a range, no record's columns, batch_ok false, its rule, code and
 * message, its byte span (batch_position, lost_bytes) and the offsets it hides (lost_first_offset,
 * lost_last_offset; in batches mode base_offset / last_offset / size too).
 */
final class LostRows {
    /** The validation columns (segment_columns.VALIDATION_COLUMNS). */
    static final Set<String> VERDICT_COLUMNS = Set.of("batch_ok", "batch_error", "error_rule", "error_code",
        "lost_bytes", "lost_first_offset", "lost_last_offset");
    private static final UTF8String[] RULE_IDS = java.util.Arrays.stream(Native.RULE_IDS).map(UTF8String::fromString)
        .toArray(UTF8String[]::new);
    private static final long NONE = SegmentLosses.NONE;

    private LostRows() { }

    static UTF8String ruleId(int rule) {
        return RULE_IDS[rule];
    }

    /** The rows of the ranges of `named` whose offsets can be in `ranges` (SegmentRanges.packed(); one
     * whose offsets are not known is in every range), in `schema`'s columns. */
    static ColumnarBatch batch(List<SegmentLosses.Unreadable> named, StructType schema, SegmentSplit split,
                               boolean batches, long[] ranges) {
        List<SegmentLosses.Unreadable> kept = new ArrayList<>();
        for (SegmentLosses.Unreadable u : named) {
            boolean below = (ranges[0] & 1) != 0 && u.last != NONE && u.last < ranges[1];
            boolean above = (ranges[0] & 2) != 0 && u.first != NONE && u.first >= ranges[2];
            if (!below && !above) {
                kept.add(u);
            }
        }
        int n = kept.size();
        StructField[] fields = schema.fields();
        ColumnVector[] columns = new ColumnVector[fields.length];
        for (int i = 0; i < fields.length; i++) {
            OnHeapColumnVector v = new OnHeapColumnVector(Math.max(n, 1), fields[i].dataType());
            for (int r = 0; r < n; r++) {
                put(v, fields[i].name(), fields[i].dataType(), kept.get(r), split, batches, r);
            }
            columns[i] = v;
        }
        return new ColumnarBatch(columns, n);
    }

    private static void put(OnHeapColumnVector v, String name, DataType type, SegmentLosses.Unreadable u,
                            SegmentSplit split, boolean batches, int r) {
        switch (name) {
            case "topic": string(v, r, split.topic); return;
            case "partition": v.putInt(r, split.partition); return;
            case "segment": v.putLong(r, split.segment); return;
            case "path": string(v, r, split.path); return;
            case "batch_position": v.putLong(r, u.position); return;
            case "batch_ok": v.putBoolean(r, false); return;
            case "batch_error": bytes(v, r, u.message.getBytes()); return;
            case "error_rule": bytes(v, r, RULE_IDS[u.rule].getBytes()); return;
            case "error_code": v.putShort(r, (short) u.code); return;
            case "lost_bytes": v.putLong(r, u.size); return;
            case "lost_first_offset": offset(v, r, u.first); return;
            case "lost_last_offset": offset(v, r, u.last); return;
            default:
                break;
        }
        if (batches && name.equals("base_offset")) {
            offset(v, r, u.first);
        } else if (batches && name.equals("last_offset")) {
            offset(v, r, u.last);
        } else if (batches && name.equals("size") && type.equals(DataTypes.LongType)) {
            v.putLong(r, u.size);
        } else {
            v.putNull(r);
        }
    }

    private static void offset(OnHeapColumnVector v, int r, long offset) {
        if (offset == NONE) {
            v.putNull(r);
        } else {
            v.putLong(r, offset);
        }
    }

    private static void string(OnHeapColumnVector v, int r, String s) {
        bytes(v, r, s.getBytes(StandardCharsets.UTF_8));
    }

    private static void bytes(OnHeapColumnVector v, int r, byte[] b) {
        v.putByteArray(r, b, 0, b.length);
    }
}
