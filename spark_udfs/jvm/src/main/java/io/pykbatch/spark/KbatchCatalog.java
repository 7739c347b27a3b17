package io.pykbatch.spark;

import java.util.Arrays;
import org.apache.spark.sql.connector.catalog.FunctionCatalog;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.UnboundFunction;
import org.apache.spark.sql.catalyst.analysis.NoSuchFunctionException;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * pykbatch's Spark functions as a catalog of V2 functions (spark.sql.catalog.pykbatch =
 * io.pykbatch.spark.KbatchCatalog): `pykbatch.kbatch_validate(value)` in SQL, and the plain names
 * once {@link Functions#register} has run.  Spark binds each call to a class whose `invoke` method
 * it calls from generated code: no Python worker, no row conversion.
 */
public final class KbatchCatalog implements FunctionCatalog {
    static final String[] NAMES = {"kbatch_validate", "kbatch_crc32c", "kbatch_decode", "kbatch_batch_info",
        "kbatch_repair"};
    private String name = "pykbatch";

    @Override
    public void initialize(String name, CaseInsensitiveStringMap options) {
        this.name = name;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Identifier[] listFunctions(String[] namespace) {
        return Arrays.stream(NAMES).map(n -> Identifier.of(namespace, n)).toArray(Identifier[]::new);
    }

    @Override
    public UnboundFunction loadFunction(Identifier ident) throws NoSuchFunctionException {
        if (ident.namespace().length == 0 && ident.name().equalsIgnoreCase("kbatch_validate")) {
            return new ValidateFunction.Unbound("kbatch_validate", "kbatch_validate(value [, options]): every culprit "
                + "of a binary column of Kafka record batches, with KIP-467's error code, error_records and error_message");
        }
        if (ident.namespace().length == 0 && ident.name().equalsIgnoreCase("kbatch_repair")) {
            return new ValidateFunction.Unbound("kbatch_repair", "kbatch_repair(value [, options]): each value "
                + "rebuilt without its culprit records, with what was dropped");
        }
        if (ident.namespace().length == 0 && ident.name().equalsIgnoreCase("kbatch_crc32c")) {
            return Crc32cFunction.UNBOUND;
        }
        if (ident.namespace().length == 0 && ident.name().equalsIgnoreCase("kbatch_decode")) {
            return DecodeFunction.UNBOUND;
        }
        if (ident.namespace().length == 0 && ident.name().equalsIgnoreCase("kbatch_batch_info")) {
            return BatchInfoFunction.UNBOUND;
        }
        SchemaFunction defined = ident.namespace().length == 0 ? SchemaFunction.defined(ident.name()) : null;
        if (defined != null) {  // kbatch_from_avro / _confluent for a schema the driver compiled (jvm_avro.py)
            return defined;
        }
        throw new NoSuchFunctionException(ident);
    }
}
