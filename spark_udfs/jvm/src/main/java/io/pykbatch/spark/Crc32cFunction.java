package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;

/** kbatch_crc32c(value): the core's CRC-32C of the bytes, as a bigint (null for null). */
public final class Crc32cFunction extends ValueFunction<Long> {
    private static final long serialVersionUID = 1L;
    static final UnboundFunction UNBOUND = unbound("kbatch_crc32c", "kbatch_crc32c(value): CRC-32C of a binary "
        + "column's bytes", Crc32cFunction::new);

    private Crc32cFunction() {
        super("kbatch_crc32c");
    }

    // produceResult, not a magic method: a null row's result is null, which a `long` cannot carry
    @Override
    public Long produceResult(InternalRow input) {
        return input.isNullAt(0) ? null : Native.crc32c(input.getBinary(0));
    }
}
