package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** kbatch_decode(value): the records of a binary column of record batches, null for null input and
 * for input that does not decode cleanly, as the Python function defines it. */
public final class DecodeFunction implements ScalarFunction<ArrayData> {
    private static final DataType RESULT = Types.of("kbatch_decode");
    private static final StructType RECORD = (StructType) ((ArrayType) RESULT).elementType();

    static final class Unbound implements UnboundFunction {
        @Override
        public BoundFunction bind(StructType input) {
            if (input.fields().length != 1 || !(input.fields()[0].dataType() instanceof BinaryType)) {
                throw new UnsupportedOperationException("kbatch_decode(value binary), not (" + input.simpleString() + ")");
            }
            return new DecodeFunction();
        }

        @Override
        public String description() {
            return "kbatch_decode(value): the records of a binary column of Kafka record batches";
        }

        @Override
        public String name() {
            return "kbatch_decode";
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
        return "kbatch_decode";
    }

    @Override
    public String canonicalName() {
        return "pykbatch.kbatch_decode";
    }

    @Override
    public ArrayData produceResult(InternalRow input) {
        if (input.isNullAt(0)) {
            return null;
        }
        byte[] row = input.getBinary(0);
        return Decoder.get().decode(row, 0, row.length, RECORD);
    }
}
