package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/** kbatch_batch_info(value): the header of every entry of a binary column of record batches (those
 * before a framing fault), null for a null value, as the Python function gives them. */
public final class BatchInfoFunction extends ValueFunction<ArrayData> {
    private static final long serialVersionUID = 1L;
    private static final DataType RESULT = Types.of("kbatch_batch_info");
    private static final StructType INFO = (StructType) ((ArrayType) RESULT).elementType();
    // kb_jni.c's BI_* layout: one long a field, in this order
    private static final String[] SLOTS = {"position", "size", "magic", "base_offset", "last_offset", "record_count",
        "compression", "timestamp_type", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
        "partition_leader_epoch", "is_transactional", "is_control", "crc", "is_valid"};
    static final int WIDTH = SLOTS.length;
    private static final int MAGIC = 2;  // the magic's slot

    /** A field's slot (batch_position: the entry's position). */
    static int slot(String name) {
        int k = java.util.Arrays.asList(SLOTS).indexOf(name.equals("batch_position") ? "position" : name);
        if (k < 0) {
            throw new IllegalStateException("kafka-segment on the JVM has no batch column " + name);
        }
        return k;
    }
    static final UnboundFunction UNBOUND = unbound("kbatch_batch_info", "kbatch_batch_info(value): the header of "
        + "every batch of a binary column of Kafka record batches", BatchInfoFunction::new);
    private static final UTF8String[] TIMESTAMP_TYPES = {
        UTF8String.fromString(Native.timestampTypeName(0)), UTF8String.fromString(Native.timestampTypeName(1)),
        UTF8String.fromString(Native.timestampTypeName(2))};
    private static final UTF8String[] CODECS = new UTF8String[8];
    private static final int[] SLOT_OF = new int[INFO.fields().length];  // the struct's field i is slot SLOT_OF[i]
    private static final DataType[] TYPE_OF = new DataType[INFO.fields().length];

    static {
        for (int c = 0; c < CODECS.length; c++) {
            String name = Native.codecName(c);
            CODECS[c] = UTF8String.fromString(name == null ? "unknown(" + c + ")" : name);  // codec_name's words
        }
        StructField[] fields = INFO.fields();
        for (int i = 0; i < fields.length; i++) {
            SLOT_OF[i] = java.util.Arrays.asList(SLOTS).indexOf(fields[i].name());
            TYPE_OF[i] = fields[i].dataType();
            if (SLOT_OF[i] < 0) {
                throw new IllegalStateException("kbatch_batch_info on the JVM has no field " + fields[i].name());
            }
        }
    }

    private BatchInfoFunction() {
        super("kbatch_batch_info");
    }


    @Override
    public ArrayData produceResult(InternalRow input) {
        if (input.isNullAt(0)) {
            return null;
        }
        byte[] row = input.getBinary(0);
        long[] slots = Decoder.get().batchInfo(row, 0, row.length);
        Object[] out = new Object[slots.length / WIDTH];
        for (int e = 0; e < out.length; e++) {
            Object[] values = new Object[SLOT_OF.length];
            for (int i = 0; i < SLOT_OF.length; i++) {
                values[i] = value(SLOTS[SLOT_OF[i]], TYPE_OF[i], slots[e * WIDTH + SLOT_OF[i]], slots[e * WIDTH + MAGIC]);
            }
            out[e] = new GenericInternalRow(values);
        }
        return new GenericArrayData(out);
    }

    /** One slot as Spark's value of the field's type (a v0/v1 entry's record count: null; a v2
     * batch's is its header's, a damaged one's negative too). */
    static Object value(String name, DataType type, long v, long magic) {
        switch (name) {
            case "compression": return CODECS[(int) v & 7];
            case "timestamp_type": return TIMESTAMP_TYPES[(int) v];
            case "record_count": return magic < 2 ? null : (Object) (int) v;
            default: break;
        }
        if (type == DataTypes.BooleanType) {
            return v != 0;
        }
        if (type == DataTypes.ByteType) {
            return (byte) v;
        }
        if (type == DataTypes.ShortType) {
            return (short) v;
        }
        if (type == DataTypes.IntegerType) {
            return (int) v;
        }
        return v;
    }
}
