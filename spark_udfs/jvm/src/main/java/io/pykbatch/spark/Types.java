package io.pykbatch.spark;

import java.io.InputStream;
import java.util.Properties;
import org.apache.spark.sql.types.DataType;

/** The functions' Spark result types, written into the jar from pykbatch.columns when it is built
 * (types.properties: name = Spark's JSON of the type): one schema for both paths. */
final class Types {
    private static final Properties JSON = new Properties();

    static {
        try (InputStream in = Types.class.getResourceAsStream("types.properties")) {
            JSON.load(in);
        } catch (Exception e) {
            throw new IllegalStateException("pykbatch's jar lacks types.properties: rebuild it", e);
        }
    }

    static DataType of(String function) {
        String json = JSON.getProperty(function);
        if (json == null) {
            throw new IllegalStateException("pykbatch's jar has no type for " + function);
        }
        return DataType.fromJson(json);
    }
}
