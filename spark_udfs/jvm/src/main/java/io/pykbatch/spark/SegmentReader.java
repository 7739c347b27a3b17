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
    private final boolean compacted;
    private final StructType schema;
    private long handle;
    private ColumnarBatch batch;
    private SegmentLosses losses;  // validated: what the split cannot deliver, rows of their own
    private boolean finished;      // losses.finish() done
    private final java.util.ArrayDeque<ColumnarBatch> queued = new java.util.ArrayDeque<>();

    SegmentReader(SegmentSplit split, StructType schema, boolean batches, boolean validate, boolean compacted,
                  long windowBytes, long[] ranges, SegmentStore store) {
        this.split = split;
        this.schema = schema;
        this.compacted = compacted;
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
        if (split.consumer != null) {  // a tiered read validates only for the verdict columns it reads
            boolean verdictRead = false;
            for (String name : LostRows.VERDICT_COLUMNS) {
                verdictRead |= schema.getFieldIndex(name).isDefined();
            }
            validate &= verdictRead;
        }  // else what cannot be read is rows of its own, counted even where no column is read
        Map<String, String> checks = new HashMap<>();
        if (validate) {  // the log's checks, every failing entry named (segment_columns.LOG)
            checks.put("origin", "log");
            checks.put("max_culprits", String.valueOf(Integer.MAX_VALUE));
            if (compacted) {  // offsets missing between entries are the cleaner's, as in SegmentLosses
                checks.put("compacted", "true");
            }
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
        if (batches && !java.util.Arrays.asList("topic", "partition", "segment", "path", "leader_epoch")
                .contains(field.name()) && !LostRows.VERDICT_COLUMNS.contains(field.name())) {
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
            case "batch_ok": return new NativeColumn.Verdict(t, w, NativeColumn.Verdict.OK);
            case "batch_error": return new NativeColumn.Verdict(t, w, NativeColumn.Verdict.MESSAGE);
            case "error_rule": return new NativeColumn.Verdict(t, w, NativeColumn.Verdict.RULE);
            case "error_code": return new NativeColumn.Verdict(t, w, NativeColumn.Verdict.CODE);
            case "lost_bytes": case "lost_first_offset": case "lost_last_offset":
                return new NativeColumn.Nulls(t, w);  // a record's row: nothing lost
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
            } else if (validator != null) {
                window.refresh();
                losses = new SegmentLosses(validator, split, window.at[SegmentWindow.SIZE], compacted,
                    Native.segmentAccount(handle));
            }
        }
        if (!queued.isEmpty()) {
            batch = queued.poll();
            return true;
        }
        for (;;) {
            if (Native.segmentNext(handle) == 0) {
                if (losses != null && !finished) {
                    finished = true;
                    java.util.List<SegmentLosses.Unreadable> named = losses.finish(window.at[SegmentWindow.BASE],
                        Native.segmentSkips(handle), Native.segmentState(handle));
                    if (!named.isEmpty()) {
                        batch = LostRows.batch(named, schema, split, batches, ranges);
                        return batch.numRows() > 0;
                    }
                }
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
            ColumnarBatch lost = null;
            if (validator != null) {
                int entries = (int) window.at[SegmentWindow.ENTRIES];
                Validator.Culprit[] verdicts = new Validator.Culprit[entries];
                long base = window.at[SegmentWindow.BASE], lo = window.at[SegmentWindow.LO];
                long hi = window.at[SegmentWindow.HI];
                if (losses != null) {
                    long[] walked = Native.segmentEntries(handle);
                    java.util.List<SegmentLosses.Unreadable> named = losses.window(base, lo, hi, walked,
                        Native.segmentSkips(handle), Native.segmentState(handle), verdicts);
                    for (int k = 0; !batches && k < entries; k++) {
                        if (walked[k * SegmentLosses.EN_WIDTH + SegmentLosses.EN_RULE] >= 0) {
                            named.add(losses.undecoded(walked, k, verdicts[k]));
                        }
                    }
                    lost = named.isEmpty() ? null : LostRows.batch(named, schema, split, batches, ranges);
                } else {  // a tiered read: each entry's verdict
                    for (Validator.Culprit c : validator.windowCulprits(base + lo, hi - lo)) {
                        if (c.entry >= 0 && c.entry < entries && verdicts[c.entry] == null) {
                            verdicts[c.entry] = c;
                        }
                    }
                }
                window.verdicts(verdicts);
            }
            codecs.messages.clear();
            if (lost != null && lost.numRows() > 0) {
                if (rows > 0) {
                    queued.add(new ColumnarBatch(columns, rows));
                }
                batch = lost;
                return true;
            }
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
