package io.pykbatch.spark;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.connector.catalog.functions.BoundFunction;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/** kbatch_validate(value [, options map<string,string>]) as the Python function defines it; the
 * functions that validate first (kbatch_repair) are its kind too: the same options, validators
 * and binding. */
public class ValidateFunction implements ScalarFunction<InternalRow> {
    private static final long serialVersionUID = 1L;
    private static final DataType OPTIONS = DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType);
    private static final Map<String, String> NO_OPTIONS = new HashMap<>();
    private final boolean configured;
    private final String family;
    private transient DataType result;
    // the last options map seen and its validator, for the thread that asked: a literal map is the
    // same object on every row, and a task's rows come on one thread
    private transient MapData lastMap;
    private transient Validator lastValidator;
    private transient Thread owner;

    ValidateFunction(String family, boolean configured) {
        this.family = family;
        this.configured = configured;
    }

    /** What the function gives for a row its validator has: kbatch_validate's verdict. */
    InternalRow apply(Validator validator, byte[] value) {
        return validator.validate(value, 0, value.length);
    }

    /** The function `family` before Spark binds it to (value binary [, options map<string,string>]). */
    static final class Unbound implements UnboundFunction {
        private final String family;
        private final String description;

        Unbound(String family, String description) {
            this.family = family;
            this.description = description;
        }

        @Override
        public BoundFunction bind(StructType input) {
            int n = input.fields().length;
            if (n < 1 || n > 2 || !(input.fields()[0].dataType() instanceof BinaryType)
                || (n == 2 && !(input.fields()[1].dataType() instanceof MapType
                    && ((MapType) input.fields()[1].dataType()).keyType() instanceof StringType
                    && ((MapType) input.fields()[1].dataType()).valueType() instanceof StringType))) {
                throw new UnsupportedOperationException(
                    family + "(value binary [, options map<string,string>]), not (" + input.simpleString() + ")");
            }
            return family.equals("kbatch_repair") ? new RepairFunction(n == 2) : new ValidateFunction(family, n == 2);
        }

        @Override
        public String description() {
            return description;
        }

        @Override
        public String name() {
            return family;
        }
    }

    @Override
    public DataType[] inputTypes() {
        return configured ? new DataType[] {DataTypes.BinaryType, OPTIONS} : new DataType[] {DataTypes.BinaryType};
    }

    @Override
    public DataType resultType() {
        if (result == null) {
            result = Types.of(family);
        }
        return result;
    }

    @Override
    public boolean isResultNullable() {
        return true;
    }

    @Override
    public String name() {
        return family;
    }

    @Override
    public String canonicalName() {
        return "pykbatch." + family;
    }

    /** Called by Spark's generated code for kbatch_validate(value). */
    public InternalRow invoke(byte[] value) {
        return value == null ? null : apply(validator(null), value);
    }

    private Validator validator(MapData options) {
        if (owner != Thread.currentThread() || options != lastMap) {
            boolean first = owner != Thread.currentThread();
            lastValidator = Validator.of(options == null ? NO_OPTIONS : toJava(options));
            lastMap = options;
            owner = Thread.currentThread();
            if (first) {
                lastValidator.refreshClock();
            }
        }
        return lastValidator;
    }

    /** Called by Spark's generated code for kbatch_validate(value, options). */
    public InternalRow invoke(byte[] value, MapData options) {
        if (value == null) {
            return null;
        }
        return apply(validator(options), value);
    }

    @Override
    public InternalRow produceResult(InternalRow input) {
        byte[] value = input.isNullAt(0) ? null : input.getBinary(0);
        return configured && !input.isNullAt(1) ? invoke(value, input.getMap(1)) : invoke(value);
    }

    private static Map<String, String> toJava(MapData map) {
        ArrayData keys = map.keyArray(), values = map.valueArray();
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < map.numElements(); i++) {
            out.put(keys.getUTF8String(i).toString(), values.isNullAt(i) ? null : values.getUTF8String(i).toString());
        }
        return out;
    }
}
