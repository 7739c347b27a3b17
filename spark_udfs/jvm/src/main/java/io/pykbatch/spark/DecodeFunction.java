package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/** kbatch_decode(value): the records of a binary column of record batches, null for null input and
 * for input that does not decode cleanly, as the Python function defines it. */
public final class DecodeFunction extends ValueFunction<ArrayData> {
    private static final long serialVersionUID = 1L;
    private static final DataType RESULT = Types.of("kbatch_decode");
    private static final StructType RECORD = (StructType) ((ArrayType) RESULT).elementType();
    static final UnboundFunction UNBOUND = unbound("kbatch_decode", "kbatch_decode(value): the records of a binary "
        + "column of Kafka record batches", DecodeFunction::new);

    private DecodeFunction() {
        super("kbatch_decode");
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
