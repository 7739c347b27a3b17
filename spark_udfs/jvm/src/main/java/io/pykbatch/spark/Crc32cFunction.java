package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** kbatch_crc32c(value): the core's CRC-32C of the bytes, as a bigint (null for null). */
public final class Crc32cFunction implements ScalarFunction<Long> {
    private static final DataType RESULT = Types.of("kbatch_crc32c");

    static final class Unbound implements UnboundFunction {
        @Override
        public BoundFunction bind(StructType input) {
            if (input.fields().length != 1 || !(input.fields()[0].dataType() instanceof BinaryType)) {
                throw new UnsupportedOperationException("kbatch_crc32c(value binary), not (" + input.simpleString() + ")");
            }
            return new Crc32cFunction();
        }

        @Override
        public String description() {
            return "kbatch_crc32c(value): CRC-32C of a binary column's bytes";
        }

        @Override
        public String name() {
            return "kbatch_crc32c";
        }
    }

    @Override
    public DataType[] inputTypes() {
        return new DataType[] {DataTypes.BinaryType};
    }

    @Override
    public DataType resultType() {
        return RESULT;
    }

    @Override
    public String name() {
        return "kbatch_crc32c";
    }

    @Override
    public String canonicalName() {
        return "pykbatch.kbatch_crc32c";
    }

    // produceResult, not a magic method: a null row's result is null, which a `long` cannot carry
    @Override
    public Long produceResult(InternalRow input) {
        return input.isNullAt(0) ? null : Native.crc32c(input.getBinary(0));
    }
}
