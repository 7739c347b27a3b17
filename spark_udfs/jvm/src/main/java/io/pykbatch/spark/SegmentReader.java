package io.pykbatch.spark;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One split of kafka-segment read by the core: the segment mapped, each window of entries decoded
 * into the core's columns (kb_log_windows), handed to Spark as a ColumnarBatch over them.  The next
 * window reuses the memory (Spark is done with a batch when it asks for the next one, as with its
 * own vectorized readers); close() frees it.
 */
final class SegmentReader implements PartitionReader<ColumnarBatch> {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger("pykbatch.tiered");
    private final SegmentSplit split;
    private final SegmentWindow window = new SegmentWindow();
    private final Decompressor codecs = new Decompressor();
    private final ColumnVector[] columns;
    private final Validator validator;
    private final long windowBytes;
    private final long[] ranges;  // SegmentRanges.packed()
    private final SegmentStore store;  // the split's store (null: a local file)
    private java.nio.file.Path spooled;  // a store's segment copied here while it is read
    private final boolean countOnly;
    private final boolean batches;  // one row an entry, its header (mode=batches)
    private long handle;
    private ColumnarBatch batch;

    SegmentReader(SegmentSplit split, StructType schema, boolean batches, boolean validate, long windowBytes,
                  long[] ranges, SegmentStore store) {
        this.split = split;
        this.ranges = ranges;
        this.store = store;
        this.windowBytes = windowBytes;
        this.batches = batches;
        this.columns = new ColumnVector[schema.fields().length];
        boolean readsColumns = false;
        for (int i = 0; i < columns.length; i++) {
            columns[i] = column(schema.fields()[i]);
            readsColumns |= !(columns[i] instanceof NativeColumn.Constant);
        }
        this.countOnly = !readsColumns;  // count(*), or the split's own values only
        validate &= schema.getFieldIndex("batch_ok").isDefined() || schema.getFieldIndex("batch_error").isDefined();
        Map<String, String> checks = new HashMap<>();
        if (validate) {  // the log's checks, every failing entry named (segment_columns.LOG)
            checks.put("origin", "log");
            checks.put("max_culprits", String.valueOf(Integer.MAX_VALUE));
            if (split.partition >= 0) {
                checks.put("topic_partition", split.topic + "-" + split.partition);
            }
        }
        this.validator = validate ? Validator.of(checks) : null;
        if (validator != null) {
            validator.refreshClock();
        }
    }

    private ColumnVector column(StructField field) {
        DataType t = field.dataType();
        SegmentWindow w = window;
        if (batches && !java.util.Arrays.asList("topic", "partition", "segment", "path", "batch_ok", "batch_error",
                                                "leader_epoch")
                .contains(field.name())) {
            return new NativeColumn.Header(t, w, field.name());
        }
        switch (field.name()) {
            case "key": return new NativeColumn.Bytes(t, w, SegmentWindow.ROWS, SegmentWindow.KEY_VALID,
                SegmentWindow.KEY_OFFSETS, SegmentWindow.KEY_DATA);
            case "value": return new NativeColumn.Bytes(t, w, SegmentWindow.ROWS, SegmentWindow.VALUE_VALID,
                SegmentWindow.VALUE_OFFSETS, SegmentWindow.VALUE_DATA);
            case "topic": return new NativeColumn.Constant(t, w, UTF8String.fromString(split.topic));
            case "partition": return new NativeColumn.Constant(t, w, split.partition);
            case "segment": return new NativeColumn.Constant(t, w, split.segment);
            case "path": return new NativeColumn.Constant(t, w, UTF8String.fromString(split.path));
            case "offset": return new NativeColumn.Longs(t, w, SegmentWindow.OFFSET);
            case "timestamp": return new NativeColumn.Longs(t, w, SegmentWindow.TIMESTAMP);
            case "timestampType": return new NativeColumn.Ints(t, w, SegmentWindow.TIMESTAMP_TYPE);
            case "sequence": return new NativeColumn.Ints(t, w, SegmentWindow.SEQUENCE);
            case "batch_index": return new NativeColumn.Ints(t, w, SegmentWindow.BATCH_INDEX);
            case "batch_position": return new NativeColumn.Longs(t, w, SegmentWindow.BATCH_POSITION);
            case "base_offset": return new NativeColumn.Longs(t, w, SegmentWindow.BASE_OFFSET);
            case "partition_leader_epoch": return new NativeColumn.Ints(t, w, SegmentWindow.LEADER_EPOCH);
            case "producer_id": return new NativeColumn.Longs(t, w, SegmentWindow.PRODUCER_ID);
            case "producer_epoch": return new NativeColumn.Shorts(t, w, SegmentWindow.PRODUCER_EPOCH);
            case "is_transactional": return new NativeColumn.Flags(t, w, SegmentWindow.IS_TRANSACTIONAL);
            case "is_control": return new NativeColumn.Flags(t, w, SegmentWindow.IS_CONTROL);
            case "batch_ok": return new NativeColumn.Verdict(t, w, false);
            case "batch_error": return new NativeColumn.Verdict(t, w, true);
            case "leader_epoch": {
                ColumnVector offsets = batches ? new NativeColumn.Header(DataTypes.LongType, w, "base_offset")
                    : new NativeColumn.Longs(DataTypes.LongType, w, SegmentWindow.OFFSET);
                return new NativeColumn.Epoch(t, w, offsets, split.epochStarts, split.epochs);
            }
            case "headers": {
                StructType header = (StructType) ((ArrayType) t).elementType();
                ColumnVector keys = new NativeColumn.Bytes(header.fields()[0].dataType(), w, SegmentWindow.HEADER_ROWS,
                    -1, SegmentWindow.HKEY_OFFSETS, SegmentWindow.HKEY_DATA);
                ColumnVector values = new NativeColumn.Bytes(header.fields()[1].dataType(), w,
                    SegmentWindow.HEADER_ROWS, SegmentWindow.HVALUE_VALID, SegmentWindow.HVALUE_OFFSETS,
                    SegmentWindow.HVALUE_DATA);
                return new NativeColumn.Headers(t, w, new NativeColumn.Struct(header, w, keys, values));
            }
            default:
                throw new IllegalStateException("kafka-segment on the JVM has no column " + field.name());
        }
    }

    @Override
    public boolean next() throws IOException {
        if (handle == 0) {
            String file = split.path;
            if (split.url != null) {
                try {
                    spooled = store.spoolRanges(split.url, split.byteRanges);
                } catch (java.io.FileNotFoundException e) {
                    // gone since the plan: no rows, said as the Python source says it (a missing object)
                    LOG.warn("kafka-segment (tiered): {}: missing_object [{}, {}] cannot be read: {} ({})",
                        split.topic + "-" + split.partition, split.consumer[3], split.consumer[4], e.getMessage(),
                        split.path);
                    return false;
                }
                file = spooled.toString();
            } else if (store != null) {
                spooled = store.spool(split.path);
                file = spooled.toString();
            }
            int fill = batches ? Native.FILL_HEADERS : countOnly ? Native.FILL_COUNT : Native.FILL_COLUMNS;
            handle = Native.segmentOpen(file, split.start, split.end, windowBytes, false, fill,
                Long.parseLong(Options.DEFAULTS.getProperty("default.max_decompressed_bytes")), codecs,
                window.buffer, split.ranges(ranges));
            if (handle == 0) {
                throw new IOException("kafka-segment: cannot open " + split.path);  // the core's exception is pending
            }
            if (split.consumer != null) {
                Native.segmentConsumer(handle, split.consumer);
            }
        }
        for (;;) {
            if (Native.segmentNext(handle) == 0) {
                return false;
            }
            window.refresh();
            int rows = (int) window.at[SegmentWindow.ROWS];
            if (batches) {
                window.headers = Native.segmentHeaders(handle);
                if (window.headers == null) {
                    throw new IOException("kafka-segment: the core refused a window");  // its exception is pending
                }
                int entries = window.headers.length / BatchInfoFunction.WIDTH;
                int[] entryOf = new int[entries];
                rows = 0;
                for (int e = 0; e < entries; e++) {
                    if (window.headers[e * BatchInfoFunction.WIDTH + 1] >= 0) {  // its size: -1 when it did not read
                        entryOf[rows++] = e;
                    }
                }
                window.entryOf = java.util.Arrays.copyOf(entryOf, rows);
            }
            if (validator != null) {
                window.verdicts = validator.entryMessages(window.at[SegmentWindow.BASE] + window.at[SegmentWindow.LO],
                    window.at[SegmentWindow.HI] - window.at[SegmentWindow.LO], (int) window.at[SegmentWindow.ENTRIES]);
            }
            codecs.messages.clear();
            if (rows > 0) {
                batch = new ColumnarBatch(columns, rows);
                return true;
            }
        }
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        if (handle != 0) {
            Native.segmentClose(handle);
            handle = 0;
        }
        if (spooled != null) {
            java.nio.file.Files.deleteIfExists(spooled);
            spooled = null;
        }
    }
}
