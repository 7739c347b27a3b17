package io.pykbatch.spark;

/**
 * kbatch_from_avro for one schema: its program compiled on the driver by pykbatch (the writer and
 * reader schemas resolved, spark_udfs/jvm_avro.py), defined here under a name of its own
 * (kbatch_from_avro_&lt;digest&gt;) that the catalog resolves; on the executors each thread decodes
 * with the core (AvroDecoder), Spark's types those of the Python function (from_avro's).
 */
public final class AvroFunction extends SchemaFunction {
    private static final long serialVersionUID = 1L;
    private final byte[] program;
    private final int[] conversions;  // two ints a column: code, aux (AvroDecoder's)
    private final String[] symbols;   // an enum column's symbols, joined by \0; null elsewhere
    private final boolean allowTrailing;

    AvroFunction(String name, byte[] program, String typeJson, int[] conversions, String[] symbols,
                         boolean failFast, boolean allowTrailing) {
        super(name, typeJson, failFast);
        this.program = program;
        this.conversions = conversions;
        this.symbols = symbols;
        this.allowTrailing = allowTrailing;
    }

    /** Called from Python on the driver: the function `name` decodes with `program`. */
    public static void define(String name, byte[] program, String typeJson, int[] conversions, String[] symbols,
                              boolean failFast, boolean allowTrailing) {
        define(new AvroFunction(name, program, typeJson, conversions, symbols, failFast, allowTrailing));
    }

    @Override
    String family() {
        return "kbatch_from_avro";
    }

    /** The value decoded (null: a null value, or one that cannot be read in mode PERMISSIVE). */
    @Override
    Object decode(byte[] value) {
        if (value == null) {
            return null;
        }
        AvroDecoder decoder = threadState(() -> new AvroDecoder(program, resultType(), conversions, symbols));
        Object out = decoder.decode(value, allowTrailing);
        return out == AvroDecoder.FAILED ? unreadable(decoder.failure()) : out;
    }
}
