package io.pykbatch.spark;

import java.lang.ref.Cleaner;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One thread's decoder of one kbatch_from_avro program: the core decodes a datum into its Avro
 * columns (csrc/kb_avro.c), which are read in place into Spark's values by a tree of readers made
 * once from the columns' layout -- the conversions spark_udfs/jvm_avro.py names for each column
 * being the ones spark_udfs.value_functions.spark_compatible makes on the Python path.
 */
final class AvroDecoder {
    static final Object FAILED = new Object();
    private static final Cleaner CLEANER = Cleaner.create();
    // the blob's header (kb_jni.c AH_*) and a column's slots in the info buffer (AC_*)
    private static final int AH_NODES = 0, AH_CHILDREN = 1, AH_TABLE = 2, AH_DEFAULTS = 3, AH_DEFAULT_BYTES = 4,
        AH_COLUMNS = 6, AH_ROOT_COLUMN = 7, AH_COLUMN_CHILDREN = 8, AVRO_HEADER = 9;
    private static final int AC_VALID = 0, AC_DATA = 1, AC_OFFSETS = 2, AC_TYPE_IDS = 3, AC_WIDTH = 5;
    // kb_col_kind
    private static final int NULL = 0, BOOL = 1, INT32 = 2, INT64 = 3, FLOAT32 = 4, FLOAT64 = 5, BINARY = 6, FIXED = 7,
        DECIMAL = 8, STRUCT = 9, LIST = 10, UNION = 11;
    // the conversions (jvm_avro.CONVERSIONS)
    static final int PLAIN = 0, STRING = 1, ENUM = 2, MILLIS_TO_MICROS = 3, NANOS_TO_MICROS = 4, MICROS_TO_NANOS = 5,
        MAP = 6, SCALED = 7;

    private interface Reader {
        Object read(int i);
    }

    private final long handle;
    private final ByteBuffer infoBytes;
    private final LongBuffer info;
    private final long[] at;
    private final int columns;
    private final Reader root;
    private final int rootColumn;
    private final boolean unsafe;  // the core writes the datum as Spark's UnsafeRow (kb_unsafe_row.c)
    private final int fields;
    private long[] fault = new long[5];

    AvroDecoder(byte[] program, DataType type, int[] conversions, String[] symbols) {
        ByteBuffer b = ByteBuffer.wrap(program).order(ByteOrder.LITTLE_ENDIAN);
        int[] h = new int[AVRO_HEADER];
        for (int k = 0; k < AVRO_HEADER; k++) {
            h[k] = b.getInt(4 * k);
        }
        columns = h[AH_COLUMNS];
        rootColumn = h[AH_ROOT_COLUMN];
        long pos = 4L * AVRO_HEADER + 24L * h[AH_NODES] + 4L * h[AH_CHILDREN] + 4L * h[AH_TABLE];
        pos = (pos + 7) & ~7L;
        pos += 16L * h[AH_DEFAULTS] + ((h[AH_DEFAULT_BYTES] + 3) & ~3L);
        int[] specs = new int[4 * columns];
        for (int k = 0; k < specs.length; k++) {
            specs[k] = b.getInt((int) pos + 4 * k);
        }
        pos += 16L * columns;
        int[] children = new int[h[AH_COLUMN_CHILDREN]];
        for (int k = 0; k < children.length; k++) {
            children[k] = b.getInt((int) pos + 4 * k);
        }
        infoBytes = ByteBuffer.allocateDirect((columns * AC_WIDTH + 8) * 8).order(ByteOrder.nativeOrder());
        info = infoBytes.asLongBuffer();
        at = new long[columns * AC_WIDTH + 8];
        long hnd = Native.avroOpen(program, conversions, infoBytes);
        if (hnd == 0) {
            throw new IllegalStateException("kbatch_from_avro: the core refused the program");  // pending exception
        }
        handle = hnd;
        CLEANER.register(this, () -> Native.avroClose(hnd));
        unsafe = Native.avroUnsafe(hnd);
        fields = specs[4 * rootColumn + 3];
        root = reader(rootColumn, specs, children, conversions, symbols);
    }

    /** The datum value as Spark's value of the function's type, or FAILED. */
    Object decode(byte[] value, boolean allowTrailing) {
        return decode(value, 0, allowTrailing);
    }

    /** The datum value[start:] (after a registry's framing), positions counted from value[0]. */
    Object decode(byte[] value, int start, boolean allowTrailing) {
        int rc = Native.avroDecode(handle, value, 0, value.length, start, allowTrailing);
        if (rc == -2) {
            throw new IllegalStateException("kbatch: the core refused a value");  // an exception is pending
        }
        if (unsafe && rc == 0) {  // one copy of the row the core wrote
            long address = info.get(columns * AC_WIDTH + 5);
            int size = (int) info.get(columns * AC_WIDTH + 6);
            byte[] bytes = new byte[size];
            Platform.copyMemory(null, address, bytes, Platform.BYTE_ARRAY_OFFSET, size);
            UnsafeRow row = new UnsafeRow(fields);
            row.pointTo(bytes, size);
            return row;
        }
        info.get(0, at);
        if (rc == -1) {
            System.arraycopy(at, columns * AC_WIDTH, fault, 0, 5);
            return FAILED;
        }
        return root.read(0);
    }

    /** The last failure, named as the catalogue names it. */
    String failure() {
        return Native.RULE_IDS[(int) fault[0]] + " at byte " + fault[1];
    }

    private boolean valid(int c, int i) {
        long v = at[c * AC_WIDTH + AC_VALID];
        return v == 0 || NativeColumn.bit(v, i);
    }

    private long data(int c) {
        return at[c * AC_WIDTH + AC_DATA];
    }

    private long offsets(int c) {
        return at[c * AC_WIDTH + AC_OFFSETS];
    }

    private Reader reader(int c, int[] specs, int[] children, int[] conversions, String[] symbols) {
        int kind = specs[4 * c], width = specs[4 * c + 1], child = specs[4 * c + 2], count = specs[4 * c + 3];
        int code = conversions[2 * c], aux = conversions[2 * c + 1];
        Reader r;
        switch (kind) {
            case NULL:
                return i -> null;
            case BOOL:
                r = i -> NativeColumn.bit(data(c), i);
                break;
            case INT32:
                if (code == ENUM) {
                    UTF8String[] names = names(symbols[c]);
                    r = i -> names[Platform.getInt(null, data(c) + 4L * i)];
                } else {
                    r = i -> Platform.getInt(null, data(c) + 4L * i);
                }
                break;
            case INT64:
                if (code == MILLIS_TO_MICROS || code == MICROS_TO_NANOS) {
                    r = i -> Platform.getLong(null, data(c) + 8L * i) * 1000L;
                } else if (code == NANOS_TO_MICROS) {
                    r = i -> Platform.getLong(null, data(c) + 8L * i) / 1000L;
                } else {
                    r = i -> Platform.getLong(null, data(c) + 8L * i);
                }
                break;
            case FLOAT32:
                r = i -> Platform.getFloat(null, data(c) + 4L * i);
                break;
            case FLOAT64:
                r = i -> Platform.getDouble(null, data(c) + 8L * i);
                break;
            case BINARY: {
                boolean text = code == STRING;
                r = i -> {
                    int start = Platform.getInt(null, offsets(c) + 4L * i);
                    byte[] out = new byte[Platform.getInt(null, offsets(c) + 4L * i + 4) - start];
                    Platform.copyMemory(null, data(c) + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
                    return text ? UTF8String.fromBytes(out) : out;
                };
                break;
            }
            case FIXED:
                r = i -> {
                    byte[] out = new byte[width];
                    Platform.copyMemory(null, data(c) + (long) width * i, out, Platform.BYTE_ARRAY_OFFSET, width);
                    return out;
                };
                break;
            case DECIMAL: {
                int precision = count, scale = aux;
                r = i -> {
                    byte[] be = new byte[width];  // little-endian two's complement -> BigInteger's big-endian
                    for (int k = 0; k < width; k++) {
                        be[width - 1 - k] = Platform.getByte(null, data(c) + (long) width * i + k);
                    }
                    return Decimal.apply(new BigDecimal(new BigInteger(be), scale), precision, scale);
                };
                break;
            }
            case STRUCT: {
                Reader[] members = new Reader[count];
                for (int m = 0; m < count; m++) {
                    members[m] = reader(children[child + m], specs, children, conversions, symbols);
                }
                r = i -> {
                    Object[] values = new Object[members.length];
                    for (int m = 0; m < members.length; m++) {
                        values[m] = members[m].read(i);
                    }
                    return new GenericInternalRow(values);
                };
                break;
            }
            case LIST: {
                int item = child;
                if (code == MAP) {  // a list of (key, value) structs
                    int entries = item, keys = children[specs[4 * entries + 2]],
                        values = children[specs[4 * entries + 2] + 1];
                    Reader key = reader(keys, specs, children, conversions, symbols);
                    Reader value = reader(values, specs, children, conversions, symbols);
                    r = i -> {
                        int start = Platform.getInt(null, offsets(c) + 4L * i);
                        int n = Platform.getInt(null, offsets(c) + 4L * i + 4) - start;
                        Object[] k = new Object[n], v = new Object[n];
                        for (int e = 0; e < n; e++) {
                            k[e] = key.read(start + e);
                            v[e] = value.read(start + e);
                        }
                        return new ArrayBasedMapData(new GenericArrayData(k), new GenericArrayData(v));
                    };
                } else {
                    Reader items = reader(item, specs, children, conversions, symbols);
                    r = i -> {
                        int start = Platform.getInt(null, offsets(c) + 4L * i);
                        Object[] out = new Object[Platform.getInt(null, offsets(c) + 4L * i + 4) - start];
                        for (int e = 0; e < out.length; e++) {
                            out[e] = items.read(start + e);
                        }
                        return new GenericArrayData(out);
                    };
                }
                break;
            }
            case UNION: {  // from_avro's struct of the non-null branches; the null branch: a null struct
                Reader[] members = new Reader[count];
                int[] field = new int[count];
                int fields = 0;
                for (int m = 0; m < count; m++) {
                    int mc = children[child + m];
                    members[m] = reader(mc, specs, children, conversions, symbols);
                    field[m] = specs[4 * mc] == NULL ? -1 : fields++;
                }
                int width0 = fields;
                return i -> {
                    int m = Platform.getByte(null, at[c * AC_WIDTH + AC_TYPE_IDS] + i);
                    if (field[m] < 0) {
                        return null;
                    }
                    Object[] values = new Object[width0];
                    values[field[m]] = members[m].read(Platform.getInt(null, offsets(c) + 4L * i));
                    return new GenericInternalRow(values);
                };
            }
            default:
                throw new IllegalStateException("kbatch_from_avro: column kind " + kind);
        }
        Reader plain = r;
        return i -> valid(c, i) ? plain.read(i) : null;
    }

    private static UTF8String[] names(String joined) {
        String[] parts = joined.split("\u0000", -1);
        UTF8String[] out = new UTF8String[parts.length];
        for (int k = 0; k < parts.length; k++) {
            out[k] = UTF8String.fromString(parts[k]);
        }
        return out;
    }
}
