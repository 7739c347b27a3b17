package io.pykbatch.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * kbatch_from_avro for one schema: its program compiled on the driver by pykbatch (the writer and
 * reader schemas resolved, spark_udfs/jvm_avro.py), defined here under a name of its own
 * (kbatch_from_avro_&lt;digest&gt;) that the catalog resolves; on the executors each thread decodes
 * with the core (AvroDecoder), Spark's types those of the Python function (from_avro's).
 */
public class AvroFunction implements UnboundFunction, ScalarFunction<Object> {
    private static final long serialVersionUID = 1L;
    private static final Map<String, AvroFunction> DEFINED = new ConcurrentHashMap<>();
    private static final ThreadLocal<Map<String, AvroDecoder>> DECODERS =
        ThreadLocal.withInitial(() -> new LinkedHashMap<String, AvroDecoder>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, AvroDecoder> eldest) {
                return size() > 8;
            }
        });

    private final String name;
    private final byte[] program;
    private final String typeJson;
    private final int[] conversions;  // two ints a column: code, aux (AvroDecoder's)
    private final String[] symbols;   // an enum column's symbols, joined by \0; null elsewhere
    private final boolean failFast;
    private final boolean allowTrailing;
    private transient DataType type;
    // this function's decoder for the thread that asked last (a task's rows come on one thread):
    // one immutable pair, read and written whole
    private transient Owned last;

    private static final class Owned {
        final Thread owner;
        final AvroDecoder decoder;

        Owned(Thread owner, AvroDecoder decoder) {
            this.owner = owner;
            this.decoder = decoder;
        }
    }

    AvroFunction(String name, byte[] program, String typeJson, int[] conversions, String[] symbols,
                         boolean failFast, boolean allowTrailing) {
        this.name = name;
        this.program = program;
        this.typeJson = typeJson;
        this.conversions = conversions;
        this.symbols = symbols;
        this.failFast = failFast;
        this.allowTrailing = allowTrailing;
    }

    /** Called from Python on the driver: the function `name` decodes with `program`. */
    public static void define(String name, byte[] program, String typeJson, int[] conversions, String[] symbols,
                              boolean failFast, boolean allowTrailing) {
        boolean record = DataType.fromJson(typeJson) instanceof StructType;
        DEFINED.put(name, record ? new Record(name, program, typeJson, conversions, symbols, failFast, allowTrailing)
            : new AvroFunction(name, program, typeJson, conversions, symbols, failFast, allowTrailing));
    }

    /** A record schema's function: Spark's generated code calls invoke (a magic method: no row
     * wrapped around the input, and the query stays in whole-stage code). */
    public static final class Record extends AvroFunction {
        private static final long serialVersionUID = 1L;

        Record(String name, byte[] program, String typeJson, int[] conversions, String[] symbols, boolean failFast,
               boolean allowTrailing) {
            super(name, program, typeJson, conversions, symbols, failFast, allowTrailing);
        }

        public InternalRow invoke(byte[] value) {
            return (InternalRow) decode(value);
        }
    }

    static AvroFunction defined(String name) {
        return DEFINED.get(name);
    }

    @Override
    public BoundFunction bind(StructType input) {
        if (input.fields().length != 1 || !(input.fields()[0].dataType() instanceof BinaryType)) {
            throw new UnsupportedOperationException("kbatch_from_avro(value binary), not (" + input.simpleString() + ")");
        }
        return this;
    }

    @Override
    public String description() {
        return "kbatch_from_avro(value): Avro datums decoded with a schema compiled by pykbatch";
    }

    @Override
    public DataType[] inputTypes() {
        return new DataType[] {DataTypes.BinaryType};
    }

    @Override
    public DataType resultType() {
        if (type == null) {
            type = DataType.fromJson(typeJson);
        }
        return type;
    }

    @Override
    public boolean isResultNullable() {
        return true;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String canonicalName() {
        return "pykbatch." + name;
    }

    @Override
    public Object produceResult(InternalRow input) {
        if (input.isNullAt(0)) {
            return null;
        }
        return decode(input.getBinary(0));
    }

    /** The value decoded (null: a null value, or one that cannot be read in mode PERMISSIVE). */
    final Object decode(byte[] value) {
        if (value == null) {
            return null;
        }
        Owned owned = last;
        if (owned == null || owned.owner != Thread.currentThread()) {
            owned = new Owned(Thread.currentThread(), DECODERS.get().computeIfAbsent(name,
                n -> new AvroDecoder(program, resultType(), conversions, symbols)));
            last = owned;
        }
        AvroDecoder decoder = owned.decoder;
        Object out = decoder.decode(value, allowTrailing);
        if (out == AvroDecoder.FAILED) {
            if (failFast) {
                throw new IllegalArgumentException(name + ": " + decoder.failure()
                    + " (mode PERMISSIVE makes such values nulls)");
            }
            return null;
        }
        return out;
    }
}
