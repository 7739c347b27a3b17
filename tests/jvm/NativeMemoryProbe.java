import io.pykbatch.spark.KbatchCatalog;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.functions.ScalarFunction;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * tests/test_jvm_native.py: kbatch_validate's JVM function over `rows` batches (cycled from the files
 * given), its options changing every `every` rows so validators (native handles, culprit buffers,
 * decompression scratch) are made and dropped all along; prints the resident set size after the
 * first tenth and at the end, and the rows that passed.
 */
public final class NativeMemoryProbe {
    public static void main(String[] a) throws Exception {
        long rows = Long.parseLong(a[0]);
        int every = Integer.parseInt(a[1]);
        List<byte[]> values = new ArrayList<>();
        for (int i = 2; i < a.length; i++) {
            values.add(Files.readAllBytes(Paths.get(a[i])));
        }
        @SuppressWarnings("unchecked")
        ScalarFunction<InternalRow> f = (ScalarFunction<InternalRow>) new KbatchCatalog()
            .loadFunction(Identifier.of(new String[0], "kbatch_validate"))
            .bind(new StructType().add("v", DataTypes.BinaryType)
                .add("o", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType)));
        java.lang.reflect.Method invoke = f.getClass().getMethod("invoke", byte[].class, MapData.class);
        long ok = 0, warm = 0;
        MapData options = null;
        for (long i = 0; i < rows; i++) {
            if (i % every == 0) {  // a new map object each time: a new validator (the old one dropped)
                options = new ArrayBasedMapData(
                    new GenericArrayData(new Object[] {UTF8String.fromString("max_culprits")}),
                    new GenericArrayData(new Object[] {UTF8String.fromString(Long.toString(1 + (i / every) % 50))}));
            }
            InternalRow r = (InternalRow) invoke.invoke(f, values.get((int) (i % values.size())), options);
            ok += r.getBoolean(0) ? 1 : 0;
            if (i == rows / 10) {
                warm = rss();
            }
        }
        System.gc();
        Thread.sleep(200);
        System.out.println("RSS " + warm + " " + rss() + " OK " + ok);
    }

    private static long rss() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        return -1;
    }
}
