package io.pykbatch.spark;

import java.util.Arrays;

/**
 * kbatch_from_confluent for one subject and reader: every version of the subject the registry held
 * when the query was planned, compiled on the driver against the one reader schema
 * (spark_udfs/jvm_avro.py define_confluent), defined here under a name of its own
 * (kbatch_from_confluent_&lt;digest&gt;). On the executors each value's framing is read by the core
 * (kb_read_frame) and its datum decoded by its writer's program; Spark's type is the reader's, as
 * the Python function gives it. An id the driver did not resolve is asked of the registry
 * (RegistryCheck): unknown there, the value cannot be read; registered since, the task fails
 * saying the query must be planned again -- a value is never made null because it is new.
 */
public final class ConfluentFunction extends SchemaFunction {
    private static final long serialVersionUID = 1L;
    private final int[] conversions;   // the reader's columns (AvroDecoder's codes)
    private final String[] symbols;
    private final boolean allowTrailing;
    private final long[] ids;          // ascending: the subject's versions' schema ids at planning
    private final byte[][] programs;   // each id's program; null: refused (refusals[k] says why)
    private final String[] refusals;
    private final String subject;
    private final RegistryCheck registry;

    /** A thread's decoders (one an id, made when its first value comes) and framing scratch. */
    private static final class State {
        final AvroDecoder[] decoders;
        final long[] frame = new long[4];

        State(int ids) {
            decoders = new AvroDecoder[ids];
        }
    }

    ConfluentFunction(String name, String typeJson, int[] conversions, String[] symbols, boolean failFast,
                      boolean allowTrailing, long[] ids, byte[][] programs, String[] refusals, String subject,
                      RegistryCheck registry) {
        super(name, typeJson, failFast);
        this.conversions = conversions;
        this.symbols = symbols;
        this.allowTrailing = allowTrailing;
        this.ids = ids;
        this.programs = programs;
        this.refusals = refusals;
        this.subject = subject;
        this.registry = registry;
    }

    /** Called from Python on the driver: the function `name` reads the subject's values; ids
     * ascending, each with its program (sizes[k] bytes of packed, in order) or, size -1, its
     * refusal. The registry's settings serve RegistryCheck only. */
    public static void define(String name, String typeJson, int[] conversions, String[] symbols, boolean failFast,
                              boolean allowTrailing, long[] ids, byte[] packed, int[] sizes, String[] refusals,
                              String subject, String url, String authorization, String caPem,
                              boolean clientCertificate, long timeoutMs) {
        byte[][] programs = new byte[ids.length][];
        int at = 0;
        for (int k = 0; k < ids.length; k++) {
            if (k > 0 && ids[k - 1] >= ids[k]) {
                throw new IllegalArgumentException("kbatch_from_confluent: schema ids must ascend");
            }
            if (sizes[k] >= 0) {
                programs[k] = Arrays.copyOfRange(packed, at, at + sizes[k]);
                at += sizes[k];
            }
        }
        RegistryCheck check = new RegistryCheck(url, authorization, caPem, clientCertificate, timeoutMs);
        define(new ConfluentFunction(name, typeJson, conversions, symbols, failFast, allowTrailing, ids, programs,
                                     refusals, subject, check));
    }

    @Override
    String family() {
        return "kbatch_from_confluent";
    }

    /** The value decoded (null: a null value, or one that cannot be read in mode PERMISSIVE). */
    @Override
    Object decode(byte[] value) {
        if (value == null) {
            return null;
        }
        State state = threadState(() -> new State(ids.length));
        long[] frame = state.frame;
        int rule = Native.readFrame(value, frame);
        if (rule != 0) {
            return unreadable(Native.RULE_IDS[rule] + " at byte " + frame[0]);
        }
        int k = Arrays.binarySearch(ids, frame[0]);
        if (k < 0) {
            return unresolved(frame[0]);
        }
        if (programs[k] == null) {
            return unreadable("value.schema_mismatch: schema " + ids[k] + ": " + refusals[k]);
        }
        AvroDecoder decoder = state.decoders[k];
        if (decoder == null) {
            decoder = new AvroDecoder(programs[k], resultType(), conversions, symbols);
            state.decoders[k] = decoder;
        }
        Object out = decoder.decode(value, (int) frame[1], allowTrailing);
        return out == AvroDecoder.FAILED ? unreadable(decoder.failure()) : out;
    }

    /** A schema id the driver did not resolve: unknown to the registry, the value cannot be read;
     * in the registry (registered since, or under another subject), the task fails: a null would
     * lose a value the Python path reads. */
    private Object unresolved(long id) {
        if (!registry.has(id)) {
            return unreadable("value.schema_unknown: the registry at " + registry.url() + " has no schema " + id);
        }
        throw new IllegalStateException("kbatch_from_confluent: schema id " + id + " is in the registry but was not "
            + "a version of subject " + subject + " when the query was planned (its ids then: " + Arrays.toString(ids)
            + "): plan the query again (restart a streaming query) to read its values; values written under other "
            + "subjects are read by the Python path (spark_udfs.register(spark, jvm=False))");
    }
}
