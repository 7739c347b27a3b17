package io.pykbatch.spark;

import java.util.function.Supplier;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** A pykbatch function of one binary column (kbatch_decode(value), ...): its name, its Spark type
 * (the function table's, from the jar) and the one binding they all check. */
abstract class ValueFunction<R> implements ScalarFunction<R> {
    private static final long serialVersionUID = 1L;
    private final String name;
    private transient DataType type;

    ValueFunction(String name) {
        this.name = name;
    }

    /** The function `name` before Spark binds it to (value binary): `make` gives the bound one. */
    static UnboundFunction unbound(String name, String description, Supplier<BoundFunction> make) {
        return new UnboundFunction() {
            @Override
            public BoundFunction bind(StructType input) {
                requireOneBinary(name, input);
                return make.get();
            }

            @Override
            public String description() {
                return description;
            }

            @Override
            public String name() {
                return name;
            }
        };
    }

    static void requireOneBinary(String name, StructType input) {
        if (input.fields().length != 1 || !(input.fields()[0].dataType() instanceof BinaryType)) {
            throw new UnsupportedOperationException(name + "(value binary), not (" + input.simpleString() + ")");
        }
    }

    @Override
    public DataType[] inputTypes() {
        return new DataType[] {DataTypes.BinaryType};
    }

    @Override
    public DataType resultType() {
        if (type == null) {
            type = Types.of(name);
        }
        return type;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String canonicalName() {
        return "pykbatch." + name;
    }
}
