package io.pykbatch.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * kbatch_from_avro for one schema: its program compiled on the driver by pykbatch (the writer and
 * reader schemas resolved, spark_udfs/jvm_avro.py), defined here under a name of its own
 * (kbatch_from_avro_&lt;digest&gt;) that the catalog resolves; on the executors each thread decodes
 * with the core (AvroDecoder), Spark's types those of the Python function (from_avro's).
 */
public class AvroFunction extends SchemaFunction {
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
    private final int[] conversions;  // two ints a column: code, aux (AvroDecoder's)
    private final String[] symbols;   // an enum column's symbols, joined by \0; null elsewhere
    private final boolean allowTrailing;
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
        super(name, typeJson, failFast);
        this.name = name;
        this.program = program;
        this.conversions = conversions;
        this.symbols = symbols;
        this.allowTrailing = allowTrailing;
    }

    /** Called from Python on the driver: the function `name` decodes with `program`. */
    public static void define(String name, byte[] program, String typeJson, int[] conversions, String[] symbols,
                              boolean failFast, boolean allowTrailing) {
        DEFINED.put(name, isRecord(typeJson) ? new Record(name, program, typeJson, conversions, symbols, failFast, allowTrailing)
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
    String family() {
        return "kbatch_from_avro";
    }

    /** The value decoded (null: a null value, or one that cannot be read in mode PERMISSIVE). */
    @Override
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
        return out == AvroDecoder.FAILED ? unreadable(decoder.failure()) : out;
    }
}
