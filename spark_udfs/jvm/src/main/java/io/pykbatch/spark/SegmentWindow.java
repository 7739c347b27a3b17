package io.pykbatch.spark;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import org.apache.spark.unsafe.types.UTF8String;

/** The records the core last decoded -- a kafka-segment reader's window, or kbatch_decode's row --:
 * their counts and the addresses of their columns, as csrc/jni/kb_jni.c writes them (INFO_* there,
 * the same order here), and each entry's verdict (kafka-segment's validate). */
final class SegmentWindow {
    static final int ROWS = 0, HEADER_ROWS = 1, LO = 2, HI = 3, ENTRIES = 4, UNDECODED = 5, BASE = 6, SIZE = 7,
        OFFSET = 8, TIMESTAMP = 9, TIMESTAMP_TYPE = 10, SEQUENCE = 11, BATCH_INDEX = 12, BATCH_POSITION = 13,
        BASE_OFFSET = 14, LEADER_EPOCH = 15, PRODUCER_ID = 16, PRODUCER_EPOCH = 17, IS_TRANSACTIONAL = 18,
        IS_CONTROL = 19, KEY_VALID = 20, KEY_OFFSETS = 21, KEY_DATA = 22, VALUE_VALID = 23, VALUE_OFFSETS = 24,
        VALUE_DATA = 25, HEADER_OFFSETS = 26, HKEY_OFFSETS = 27, HKEY_DATA = 28, HVALUE_VALID = 29,
        HVALUE_OFFSETS = 30, HVALUE_DATA = 31, TIMESTAMP_TYPE_INDEX = 32, COUNT = 33;

    final ByteBuffer buffer = ByteBuffer.allocateDirect(COUNT * 8).order(ByteOrder.nativeOrder());
    private final LongBuffer longs = buffer.asLongBuffer();
    final long[] at = new long[COUNT];
    UTF8String[] verdicts = new UTF8String[0];  // each entry's first culprit's message (null: it passed)
    UTF8String[] rules = new UTF8String[0];     // ... its rule
    short[] codes = new short[0];               // ... its Kafka code
    long[] headers;  // batches mode: the window's entry headers (BatchInfoFunction's slots), an entry each
    int[] entryOf;   // batches mode: each row's entry (an entry whose header does not read has no row)

    /** The window's rows: its records, or in batches mode its entries whose header reads. */
    int rows() {
        return entryOf != null ? entryOf.length : (int) at[ROWS];
    }

    /** Each entry's verdict from its first culprit (null: it passed). */
    void verdicts(Validator.Culprit[] first) {
        verdicts = new UTF8String[first.length];
        rules = new UTF8String[first.length];
        codes = new short[first.length];
        for (int k = 0; k < first.length; k++) {
            if (first[k] != null) {
                verdicts[k] = first[k].message;
                rules[k] = LostRows.ruleId(first[k].rule);
                codes[k] = (short) first[k].code;
            }
        }
    }

    /** Takes what the core wrote for the window just read. */
    void refresh() {
        longs.get(0, at);
    }
}
