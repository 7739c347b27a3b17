package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** A value decoder whose schema the driver compiled (kbatch_from_avro, kbatch_from_confluent),
 * defined under a name of its own: Spark's type from the Python function's, a value that cannot be
 * read a null (mode PERMISSIVE) or a failed task naming why (FAILFAST). */
abstract class SchemaFunction implements UnboundFunction, ScalarFunction<Object> {
    private static final long serialVersionUID = 1L;
    private final String name;
    private final String typeJson;
    private final boolean failFast;
    private transient DataType type;

    SchemaFunction(String name, String typeJson, boolean failFast) {
        this.name = name;
        this.typeJson = typeJson;
        this.failFast = failFast;
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
        return input.isNullAt(0) ? null : decode(input.getBinary(0));
    }

    /** A value that cannot be read: null, or (FAILFAST) the task fails saying why. */
    final Object unreadable(String why) {
        if (failFast) {
            throw new IllegalArgumentException(name + ": " + why + " (mode PERMISSIVE makes such values nulls)");
        }
        return null;
    }

    static boolean isRecord(String typeJson) {
        return DataType.fromJson(typeJson) instanceof StructType;
    }
}
