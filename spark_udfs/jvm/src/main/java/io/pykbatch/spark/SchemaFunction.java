package io.pykbatch.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/** A value decoder whose schema the driver compiled (kbatch_from_avro, kbatch_from_confluent),
 * defined under a name of its own: Spark's type from the Python function's, a value that cannot be
 * read a null (mode PERMISSIVE) or a failed task naming why (FAILFAST). */
abstract class SchemaFunction extends ValueFunction<Object> implements UnboundFunction {
    private static final long serialVersionUID = 1L;
    private static final Map<String, SchemaFunction> DEFINED = new ConcurrentHashMap<>();
    // each thread's decoding state of the functions it ran last (native memory: a few kept)
    private static final ThreadLocal<Map<String, Object>> STATE =
        ThreadLocal.withInitial(() -> new LinkedHashMap<String, Object>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Object> eldest) {
                return size() > 16;
            }
        });
    private final String typeJson;
    private final boolean failFast;
    private transient DataType type;
    // this function's state for the thread that asked last (a task's rows come on one thread): one
    // immutable pair, read and written whole
    private transient Owned last;

    private static final class Owned {
        final Thread owner;
        final Object state;

        Owned(Thread owner, Object state) {
            this.owner = owner;
            this.state = state;
        }
    }

    SchemaFunction(String name, String typeJson, boolean failFast) {
        super(name);
        this.typeJson = typeJson;
        this.failFast = failFast;
    }

    /** Called on the driver: `f` under its name for the catalog (a record's as a Record). */
    static void define(SchemaFunction f) {
        DEFINED.put(f.name(), isRecord(f.typeJson) ? new Record(f) : f);
    }

    static SchemaFunction defined(String name) {
        return DEFINED.get(name);
    }

    /** A record's function: Spark's generated code calls invoke (a magic method: no row wrapped
     * around the input, and the query stays in whole-stage code). */
    public static final class Record extends SchemaFunction {
        private static final long serialVersionUID = 1L;
        private final SchemaFunction of;

        Record(SchemaFunction of) {
            super(of.name(), of.typeJson, of.failFast);
            this.of = of;
        }

        @Override
        String family() {
            return of.family();
        }

        @Override
        Object decode(byte[] value) {
            return of.decode(value);
        }

        public InternalRow invoke(byte[] value) {
            return (InternalRow) of.decode(value);
        }
    }

    /** This thread's state of this function, made once (`make`) and kept while the thread runs it. */
    @SuppressWarnings("unchecked")
    final <T> T threadState(Supplier<T> make) {
        Owned owned = last;
        if (owned == null || owned.owner != Thread.currentThread()) {
            owned = new Owned(Thread.currentThread(), STATE.get().computeIfAbsent(name(), n -> make.get()));
            last = owned;
        }
        return (T) owned.state;
    }

    /** The function's family, as users call it (kbatch_from_avro). */
    abstract String family();

    /** The value decoded (null: one that cannot be read in mode PERMISSIVE). */
    abstract Object decode(byte[] value);

    @Override
    public BoundFunction bind(StructType input) {
        ValueFunction.requireOneBinary(family(), input);
        return this;
    }

    @Override
    public String description() {
        return family() + "(value): values decoded with a schema pykbatch compiled on the driver";
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
    public Object produceResult(InternalRow input) {
        return input.isNullAt(0) ? null : decode(input.getBinary(0));
    }

    /** How a plan shows it: its catalog name (Spark prints the object of a magic method's call). */
    @Override
    public String toString() {
        return canonicalName();
    }

    /** A value that cannot be read: null, or (FAILFAST) the task fails saying why. */
    final Object unreadable(String why) {
        if (failFast) {
            throw new IllegalArgumentException(name() + ": " + why + " (mode PERMISSIVE makes such values nulls)");
        }
        return null;
    }

    static boolean isRecord(String typeJson) {
        return DataType.fromJson(typeJson) instanceof StructType;
    }
}
