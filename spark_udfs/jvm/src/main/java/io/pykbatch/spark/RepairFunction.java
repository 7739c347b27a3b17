package io.pykbatch.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.MapData;

/** kbatch_repair(value [, options map<string,string>]): each value rebuilt without its culprit
 * records (the core's kb_repair over the validator's culprits, codecs called back in Java), with
 * what was dropped and how many batches went whole, as the Python function gives it. */
public final class RepairFunction extends ValidateFunction {
    private static final long serialVersionUID = 1L;

    RepairFunction(boolean configured) {
        super("kbatch_repair", configured);
    }

    @Override
    InternalRow apply(Validator validator, byte[] value) {
        return validator.repair(value, 0, value.length);
    }

    // Spark looks for the magic methods and produceResult on the bound function's own class
    @Override
    public InternalRow invoke(byte[] value) {
        return super.invoke(value);
    }

    @Override
    public InternalRow invoke(byte[] value, MapData options) {
        return super.invoke(value, options);
    }

    @Override
    public InternalRow produceResult(InternalRow input) {
        return super.produceResult(input);
    }
}
