package io.pykbatch.spark;

import java.lang.ref.Cleaner;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * kbatch_validate of one row: the core's walk, verdict and texts as a row of pykbatch's VALIDATION
 * struct (pykbatch.columns), field for field what the Python function gives.  One validator per
 * thread and options (a Spark task runs on one thread); its native memory is freed when it is
 * dropped.
 */
final class Validator {
    private static final Cleaner CLEANER = Cleaner.create();
    private static final int SUM_ENTRIES = 0, SUM_RECORDS = 1, SUM_CULPRITS = 2, SUM_TAIL_POS = 5, SUM_KEPT = 10;
    private static final int C_WIDTH = 18, C_POS = 0, C_ENTRY_POS = 2, C_ARGS = 3, C_RELATIVE_OFFSET = 11, C_ENTRY = 12,
        C_RECORD_INDEX = 13, C_CODE = 14, C_RULE = 15, C_FIRST_OFFSET = 16, C_LAST_OFFSET = 17;
    private static final long NO_OFFSET = Long.MIN_VALUE;
    private static final int TEXT_MESSAGE = 0, TEXT_DETAIL = 1;
    private static final UTF8String NONE = UTF8String.fromString(Native.errorName(0));
    // texts every damaged row repeats, made once (UTF8String values are shared, never written to)
    private static final UTF8String[] RULE_ID_TEXTS = java.util.Arrays.stream(Native.RULE_IDS)
        .map(UTF8String::fromString).toArray(UTF8String[]::new);
    private static final java.util.Map<Integer, UTF8String> ERROR_NAMES = new java.util.concurrent.ConcurrentHashMap<>();
    private static final ArrayData EMPTY = new GenericArrayData(new Object[0]);

    private final Options options;
    private final long handle;
    private final Decompressor codecs = new Decompressor();
    // kb_jni.c writes each row's summary here (SUM_* longs, native order)
    private final java.nio.LongBuffer summary;
    private long[] culprits = new long[C_WIDTH * 64];
    private int[] verdict = new int[5 + 64];
    private int rowsSinceNow;

    private Validator(Options options) {
        this.options = options;
        java.nio.ByteBuffer summaryBytes = java.nio.ByteBuffer.allocateDirect(11 * 8).order(java.nio.ByteOrder.nativeOrder());
        summary = summaryBytes.asLongBuffer();
        long h = Native.open(options.core, codecs, summaryBytes);
        if (h == 0) {
            throw new OutOfMemoryError("kbatch: no memory for a validator");
        }
        handle = h;
        CLEANER.register(this, () -> Native.close(h));
    }

    private static final ThreadLocal<Map<Map<String, String>, Validator>> BY_OPTIONS =
        ThreadLocal.withInitial(() -> new LinkedHashMap<Map<String, String>, Validator>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Map<String, String>, Validator> eldest) {
                return size() > 8;
            }
        });

    /** This thread's validator for `given` options (as a SQL map gives them). */
    static Validator of(Map<String, String> given) {
        return BY_OPTIONS.get().computeIfAbsent(given, g -> new Validator(new Options(g)));
    }

    /** Reads the clock at the next row (a function starting on a task calls it: a validator kept by
     * the thread between tasks does not judge timestamps against an old time). */
    void refreshClock() {
        rowsSinceNow = 0;
    }

    /** kbatch_validate of row[off, off + len). */
    InternalRow validate(byte[] row, int off, int len) {
        if (options.rebuilt(row, off, len)) {
            throw new UnsupportedOperationException("kbatch_validate on the JVM: the size of the batch a broker "
                + "rebuilds (v0/v1 messages, or a topic whose compression.type or record version re-encodes, with "
                + "origin=client and max_message_bytes / segment_bytes set) is checked by the Python function only: "
                + "set both to null, or register the Python functions (spark_udfs.register(spark, jvm=False))");
        }
        if (!options.nowFixed && (rowsSinceNow++ & 1023) == 0) {  // the leader's clock: read every 1024 rows
            options.core[5] = System.currentTimeMillis();
        }
        if (Native.validate(handle, row, off, len, options.core[5]) != 0) {
            throw new IllegalStateException("kbatch: the core refused a row");  // an exception is pending
        }
        long records = summary.get(SUM_RECORDS);
        Object tail = summary.get(SUM_TAIL_POS) >= 0 ? (Object) summary.get(SUM_TAIL_POS) : null;
        if (summary.get(SUM_CULPRITS) == 0) {
            codecs.messages.clear();
            return new GenericInternalRow(new Object[] {true, 0, NONE, null, EMPTY, EMPTY, 0L, records, tail});
        }
        int kept = (int) summary.get(SUM_KEPT);
        if (culprits.length < kept * C_WIDTH) {
            culprits = new long[kept * C_WIDTH];
            verdict = new int[5 + kept];
        }
        Native.culprits(handle, culprits);
        Native.verdict(handle, verdict);
        UTF8String[] messages = new UTF8String[kept];
        Object[] rows = new Object[kept];
        for (int i = 0; i < kept; i++) {
            int at = i * C_WIDTH;
            int rule = (int) culprits[at + C_RULE];
            messages[i] = message(i);
            UTF8String detail = text(rule, TEXT_DETAIL, at);
            long relative = culprits[at + C_RELATIVE_OFFSET];
            int record = (int) culprits[at + C_RECORD_INDEX];
            int code = (int) culprits[at + C_CODE];
            rows[i] = new GenericInternalRow(new Object[] {
                (int) culprits[at + C_ENTRY], record >= 0 ? (Object) record : null,
                relative != NO_OFFSET ? (Object) relative : null, code, errorName(code),
                RULE_ID_TEXTS[rule], culprits[at + C_POS], culprits[at + C_ENTRY_POS], messages[i],
                detail == null || detail.numBytes() == 0 ? null : detail,
                (Native.RULE_FLAGS[rule] & Native.KAFKA) != 0});
        }
        codecs.messages.clear();
        int code = verdict[0];
        Object message = null;
        Object[] errorRecords = new Object[0];
        if (verdict[2] != 0) {  // the batch failed as a whole
            message = verdict[3] != 0 ? messages[verdict[1]] : null;
        } else if (code != 0) {
            int n = verdict[4];
            errorRecords = new Object[n];
            int[] shown = new int[Math.min(3, n)];
            byte[][] shownMessages = new byte[shown.length][];
            for (int k = 0; k < n; k++) {
                int c = verdict[5 + k];
                int index = (int) culprits[c * C_WIDTH + C_RECORD_INDEX];
                errorRecords[k] = new GenericInternalRow(new Object[] {index, messages[c]});
                if (k < shown.length) {
                    shown[k] = index;
                    shownMessages[k] = messages[c].getBytes();
                }
            }
            message = UTF8String.fromBytes(Native.recordErrors(code, n, shown, shownMessages));
        }
        return new GenericInternalRow(new Object[] {
            false, code, errorName(code), message, new GenericArrayData(errorRecords),
            new GenericArrayData(rows), summary.get(SUM_CULPRITS), records, tail});
    }

    /** Kafka's name of an error code, as the result's strings hold it. */
    private static UTF8String errorName(int code) {
        return ERROR_NAMES.computeIfAbsent(code, c -> UTF8String.fromString(Native.errorName(c)));
    }

    // Native.repairDropped's layout (kb_jni.c D_*)
    private static final int D_ENTRY = 0, D_RECORD_INDEX = 1, D_HAS_FIELDS = 2, D_OFFSET = 3, D_KEY = 4, D_KEY_LEN = 5,
        D_VALUE = 6, D_VALUE_LEN = 7, D_FIRST_CULPRIT = 8, D_CULPRITS = 9, D_UNREPAIRABLE = 10, D_WIDTH = 11;
    // a VALIDATION row's fields, and a culprit's, that a repair reads
    private static final int V_CULPRITS = 5, V_CULPRIT_COUNT = 6, V_TAIL = 8, CULPRIT_CODE = 3, CULPRIT_RULE = 5,
        CULPRIT_MESSAGE = 8;

    /** kbatch_repair of row[off, off + len), as pykbatch.arrow.repair_array gives it: the REPAIR
     * struct (the row itself when it has no culprit and no incomplete tail). */
    InternalRow repair(byte[] row, int off, int len) {
        InternalRow verdict = validate(row, off, len);
        ArrayData culpritRows = verdict.getArray(V_CULPRITS);
        if (verdict.getLong(V_CULPRIT_COUNT) == 0 && verdict.isNullAt(V_TAIL)) {
            byte[] same = off == 0 && len == row.length ? row : java.util.Arrays.copyOfRange(row, off, off + len);
            return new GenericInternalRow(new Object[] {same, EMPTY, 0});
        }
        if (verdict.getLong(V_CULPRIT_COUNT) > culpritRows.numElements()) {
            throw new IllegalArgumentException("kbatch_repair: the result holds only part of its culprits: validate "
                + "with a larger max_culprits");
        }
        byte[] data = Native.repair(handle, row, off, len);
        codecs.messages.clear();
        if (data == null) {
            throw new IllegalStateException("kbatch: the core refused a row");  // an exception is pending
        }
        long[] d = Native.repairDropped(handle);
        if (d.length == 0) {
            return new GenericInternalRow(new Object[] {data, EMPTY, 0});
        }
        byte[] bytes = Native.repairBytes(handle);
        int[] which = Native.repairCulprits(handle);
        Object[] dropped = new Object[d.length / D_WIDTH];
        for (int k = 0; k < dropped.length; k++) {
            int at = k * D_WIDTH;
            int first = (int) d[at + D_FIRST_CULPRIT], n = (int) d[at + D_CULPRITS];
            Object[] rules = new Object[n];
            for (int j = 0; j < n; j++) {
                rules[j] = culpritRows.getStruct(which[first + j], 11).getUTF8String(CULPRIT_RULE);
            }
            InternalRow lead = culpritRows.getStruct(which[first], 11);
            boolean fields = d[at + D_HAS_FIELDS] != 0;
            dropped[k] = new GenericInternalRow(new Object[] {
                (int) d[at + D_ENTRY], d[at + D_RECORD_INDEX] >= 0 ? (Object) (int) d[at + D_RECORD_INDEX] : null,
                fields ? (Object) d[at + D_OFFSET] : null,
                fields ? slice(bytes, d[at + D_KEY], d[at + D_KEY_LEN]) : null,
                fields ? slice(bytes, d[at + D_VALUE], d[at + D_VALUE_LEN]) : null,
                lead.getInt(CULPRIT_CODE), new GenericArrayData(rules), lead.getUTF8String(CULPRIT_MESSAGE)});
        }
        return new GenericInternalRow(new Object[] {data, new GenericArrayData(dropped), (int) d[D_UNREPAIRABLE]});
    }

    private static byte[] slice(byte[] bytes, long at, long len) {
        return len < 0 ? null : java.util.Arrays.copyOfRange(bytes, (int) at, (int) (at + len));
    }

    /** The message of the i-th culprit of the last walk (a codec's own words where it failed). */
    private UTF8String message(int i) {
        int at = i * C_WIDTH;
        int rule = (int) culprits[at + C_RULE];
        String id = Native.RULE_IDS[rule];
        boolean codec = id.equals("batch.decompression_failed") || id.equals("batch.decompressed_too_large");
        int messageIndex = (int) culprits[at + 3];
        return codec && messageIndex >= 0 && messageIndex < codecs.messages.size()
            ? UTF8String.fromString(codecs.messages.get(messageIndex))
            : text(rule, TEXT_MESSAGE, at);
    }

    /** One culprit of a window, as kafka-segment's account reads it (pykbatch's Culprit's fields it
     * needs; positions in the bytes validated; offsets Long.MIN_VALUE where not known). */
    static final class Culprit {
        final int entry;
        final long entryPosition;
        final int rule;
        final int code;
        final UTF8String message;
        final long firstOffset, lastOffset;
        final long[] args;

        Culprit(int entry, long entryPosition, int rule, int code, UTF8String message, long firstOffset,
                long lastOffset, long[] args) {
            this.entry = entry;
            this.entryPosition = entryPosition;
            this.rule = rule;
            this.code = code;
            this.message = message;
            this.firstOffset = firstOffset;
            this.lastOffset = lastOffset;
            this.args = args;
        }
    }

    /** Every culprit of the `len` bytes at `address` (memory that stays put: a mapped segment), in the
     * validator's order: kafka-segment's account of a window (SegmentLosses). */
    java.util.List<Culprit> windowCulprits(long address, long len) {
        if (!options.nowFixed && (rowsSinceNow++ & 1023) == 0) {
            options.core[5] = System.currentTimeMillis();
        }
        if (Native.validateAt(handle, address, len, options.core[5]) != 0) {
            throw new IllegalStateException("kbatch: the core refused a window");  // an exception is pending
        }
        int kept = (int) summary.get(SUM_KEPT);
        java.util.List<Culprit> out = new java.util.ArrayList<>(kept);
        if (summary.get(SUM_CULPRITS) > 0 && kept > 0) {
            if (culprits.length < kept * C_WIDTH) {
                culprits = new long[kept * C_WIDTH];
                verdict = new int[5 + kept];
            }
            Native.culprits(handle, culprits);
            for (int i = 0; i < kept; i++) {
                int at = i * C_WIDTH;
                out.add(new Culprit((int) culprits[at + C_ENTRY], culprits[at + C_ENTRY_POS], (int) culprits[at + C_RULE],
                    (int) culprits[at + C_CODE],
                    message(i), culprits[at + C_FIRST_OFFSET], culprits[at + C_LAST_OFFSET],
                    java.util.Arrays.copyOfRange(culprits, at + C_ARGS, at + C_ARGS + 8)));
            }
        }
        codecs.messages.clear();
        return out;
    }

    /** A rule's message for the core's values `args` (up to 8), the partition named as this
     * validator names it. */
    UTF8String render(int rule, long[] args) {
        long[] row = new long[C_WIDTH];
        System.arraycopy(args, 0, row, C_ARGS, Math.min(8, args.length));
        byte[] utf8 = Native.render(rule, TEXT_MESSAGE, row, 0, options.topicPartition);
        return utf8 == null ? null : UTF8String.fromBytes(utf8);
    }

    private UTF8String text(int rule, int which, int at) {
        byte[] utf8 = Native.render(rule, which, culprits, at, options.topicPartition);
        return utf8 == null ? null : UTF8String.fromBytes(utf8);
    }
}
