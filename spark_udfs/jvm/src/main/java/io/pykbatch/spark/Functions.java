package io.pykbatch.spark;

import java.lang.reflect.Method;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import scala.Option;
import scala.runtime.AbstractFunction1;

/**
 * Makes pykbatch's JVM functions callable by their plain names (SELECT kbatch_validate(value)) in a
 * session: the catalog registered as `pykbatch` (unless the session names another), and each name a
 * temporary function that resolves to the catalog's.  Called from Python (spark_udfs.register).
 * Spark's internals are reached by reflection, whose names are the same in Spark 3.5 (Scala 2.12 or
 * 2.13) and 4.x, where their Scala signatures are not.
 */
public final class Functions {
    private Functions() {}

    public static final String CATALOG_KEY = "spark.sql.catalog.pykbatch";

    /** The version of the library and classes this JVM loaded (the native check runs first). */
    public static String version() {
        return Native.version();
    }

    /** `java -cp pykbatch-spark.jar io.pykbatch.spark.Functions`: which build this jar is, its native
     * library loaded (exit status 1, with the reason, when it cannot be). */
    public static void main(String[] args) {
        try {
            System.out.println("pykbatch-spark " + version() + " (native library loaded)");
        } catch (LinkageError e) {
            System.err.println(e.getMessage());
            System.exit(1);
        }
    }

    /** Registers every JVM function's plain name in `session` (a SparkSession); returns their names. */
    public static String[] register(Object session) throws ReflectiveOperationException {
        Native.version();  // load, and refuse a mismatched library, before anything is registered
        Object conf = session.getClass().getMethod("conf").invoke(session);
        Method get = conf.getClass().getMethod("get", String.class, String.class);
        String catalog = (String) get.invoke(conf, CATALOG_KEY, "");
        if (catalog.isEmpty()) {
            conf.getClass().getMethod("set", String.class, String.class)
                .invoke(conf, CATALOG_KEY, KbatchCatalog.class.getName());
        }
        Object state = session.getClass().getMethod("sessionState").invoke(session);
        Object registry = state.getClass().getMethod("functionRegistry").invoke(state);
        Method create = null;
        for (Method m : registry.getClass().getMethods()) {
            if (m.getName().equals("createOrReplaceTempFunction") && m.getParameterCount() == 3) {
                create = m;
            }
        }
        if (create == null) {
            throw new NoSuchMethodException("FunctionRegistry.createOrReplaceTempFunction: this Spark is not 3.5 or 4.x");
        }
        for (String name : KbatchCatalog.NAMES) {
            create.invoke(registry, name, new ByCatalog(name), "java_udf");
        }
        return KbatchCatalog.NAMES.clone();
    }

    /** A temporary function's builder: the call, as pykbatch.<name>(args), for the analyzer to resolve. */
    private static final class ByCatalog extends AbstractFunction1<Object, Object> implements java.io.Serializable {
        private final String name;

        ByCatalog(String name) {
            this.name = name;
        }

        @Override
        public Object apply(Object args) {
            try {
                Class<?> companion = Class.forName("org.apache.spark.sql.catalyst.analysis.UnresolvedFunction$");
                Object module = companion.getField("MODULE$").get(null);
                for (Method m : companion.getMethods()) {
                    Class<?>[] p = m.getParameterTypes();
                    if (m.getName().equals("apply") && p.length == 3 && p[0] == FunctionIdentifier.class) {
                        FunctionIdentifier id = new FunctionIdentifier(name, Option.apply("pykbatch"), Option.empty());
                        return m.invoke(module, id, args, false);
                    }
                }
                throw new NoSuchMethodException("UnresolvedFunction.apply(FunctionIdentifier, Seq, boolean)");
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("pykbatch: cannot resolve " + name + " through its catalog", e);
            }
        }
    }
}
