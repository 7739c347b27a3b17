package io.pykbatch.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * kafka-segment over tiered storage (KIP-405: a remote store, its __remote_log_metadata, the broker's
 * log dirs) on the JVM.  Planned by pykbatch's Python on the driver -- spark_udfs/tiered_plan.py, run
 * as Spark runs a Python data source's planner, so the plan's rules (pykbatch.tiered: copies, holes,
 * lineage, aborted transactions, the last stable offset) have one home -- and read by the core split
 * by split as a consumer receives it (Native.segmentConsumer: kb_log_consumer).  A store on a local
 * file system is read in place; one in an object store Spark's Hadoop file systems serve (s3a://...)
 * is reached by the planner through fsspec (the read's fs.* options, else the session's fs.s3a.*
 * settings) and each split fetches the byte ranges the plan names (SegmentStore.spoolRanges).
 */
final class TieredPlan {
    private static final Logger LOG = LoggerFactory.getLogger("pykbatch.tiered");
    /** The options of a tiered read (lower case), beyond kafka-segment's own. */
    static final Set<String> OPTIONS = new HashSet<>(Arrays.asList(
        "remotelogmetadata", "localdirs", "isolationlevel", "layout"));
    private static final Pattern FOLDER = Pattern.compile(Native.BUILD.getProperty("tiered_folder"));
    private static final String HOME = Native.BUILD.getProperty("tiered_home");
    private static final long PLAN_SECONDS = 600;

    private TieredPlan() { }

    /** Whether a read is of a tiered store, as tiered_source.is_tiered says: an option names it, or
     * the folders right under its path, or under the LocalTieredStorage folder there, are a
     * LocalTieredStorage's (layouts.find_layout). */
    static boolean isTiered(CaseInsensitiveStringMap options, String path, SegmentStore store) {
        if (options.containsKey("layout") || options.containsKey("remoteLogMetadata")) {
            return true;
        }
        List<String> folders = folders(path, store);
        if (folders.stream().anyMatch(name -> FOLDER.matcher(name).matches())) {
            return true;
        }
        return folders.contains(HOME) && folders(path.replaceAll("/+$", "") + "/" + HOME, store).stream()
            .anyMatch(name -> FOLDER.matcher(name).matches());
    }

    private static List<String> folders(String path, SegmentStore store) {
        List<String> folders = new ArrayList<>();
        if (store != null) {
            folders.addAll(store.folders(path));
        } else {
            Path root = Paths.get(path.startsWith("file://") ? java.net.URI.create(path).getPath() : path);
            if (Files.isDirectory(root)) {
                try (Stream<Path> children = Files.list(root)) {
                    children.filter(Files::isDirectory).forEach(p -> folders.add(p.getFileName().toString()));
                } catch (IOException e) {
                    return folders;  // the read that follows names it
                }
            }
        }
        return folders;
    }

    /** The splits of a tiered read: the Python plan's, each with its file, start, consumer and lineage. */
    static List<SegmentSplit> splits(Map<String, String> options, long splitBytes, SegmentRanges ranges,
                                     SegmentStore store) {
        ObjectMapper json = new ObjectMapper();
        Map<String, Object> request = new HashMap<>();
        request.put("options", options);
        if (store != null) {  // how the planner reaches an s3a:// store without fs.* options (s3a_options.py)
            request.put("hadoop", store.settings("fs.s3a."));
        }
        request.put("splitBytes", splitBytes);
        request.put("ranges", ranges.bounds());
        JsonNode plan = run(json, request);
        for (JsonNode warning : plan.path("warnings")) {
            LOG.warn("kafka-segment (tiered): {}", warning.asText());
        }
        List<SegmentSplit> out = new ArrayList<>();
        for (JsonNode s : plan.path("splits")) {
            SegmentSplit split = new SegmentSplit(s.get("path").asText(), s.get("topic").asText(),
                s.get("partition").asInt(), s.get("segment").asLong(), s.get("start").asLong(), -1);
            if (s.has("url")) {  // an object of a remote store: the ranges the Python reader fetches of it
                split.url = s.get("url").asText();
                JsonNode spans = s.get("byteRanges");
                split.byteRanges = new long[2 * spans.size()];
                for (int i = 0; i < spans.size(); i++) {
                    split.byteRanges[2 * i] = spans.get(i).get(0).asLong();
                    split.byteRanges[2 * i + 1] = spans.get(i).get(1).asLong();
                }
            }
            JsonNode lso = s.get("lastStableOffset"), hi = s.get("hi");
            JsonNode aborted = s.get("aborted");
            long[] consumer = new long[5 + 2 * aborted.size()];
            consumer[0] = s.get("committed").asBoolean() ? 1 : 0;
            consumer[1] = lso.isNull() ? 0 : 1;
            consumer[2] = lso.isNull() ? 0 : lso.asLong();
            consumer[3] = s.get("lo").asLong();
            consumer[4] = hi.isNull() ? Long.MAX_VALUE : hi.asLong();
            for (int i = 0; i < aborted.size(); i++) {
                consumer[5 + 2 * i] = aborted.get(i).get(0).asLong();
                consumer[6 + 2 * i] = aborted.get(i).get(1).asLong();
            }
            split.consumer = consumer;
            JsonNode starts = s.get("epochStarts"), epochs = s.get("epochs");
            split.epochStarts = new long[starts.size()];
            split.epochs = new int[epochs.size()];
            for (int i = 0; i < starts.size(); i++) {
                split.epochStarts[i] = starts.get(i).asLong();
                split.epochs[i] = epochs.get(i).asInt();
            }
            out.add(split);
        }
        return out;
    }

    /** The driver's Python: the session's setting (register() and configure_spark_with_pykbatch set
     * it), else Spark's own choice for the driver (PYSPARK_DRIVER_PYTHON, PYSPARK_PYTHON), else python3. */
    static String python() {
        String setting = Native.BUILD.getProperty("python_setting");
        if (SparkSession.getActiveSession().isDefined()) {
            String python = SparkSession.getActiveSession().get().conf().get(setting, "");
            if (!python.isEmpty()) {
                return python;
            }
        }
        for (String env : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
            String python = System.getenv(env);
            if (python != null && !python.isEmpty()) {
                return python;
            }
        }
        return "python3";
    }

    private static JsonNode run(ObjectMapper json, Map<String, Object> request) {
        String python = python();
        Process p;
        File errors;
        try {
            errors = File.createTempFile("pykbatch-tiered-plan-", ".err");
            errors.deleteOnExit();
            p = new ProcessBuilder(python, "-m", "spark_udfs.tiered_plan").redirectError(errors).start();
        } catch (IOException e) {
            throw new IllegalStateException("kafka-segment: a tiered read is planned by pykbatch's Python, and "
                + python + " cannot be run (" + e.getMessage() + "); set " + Native.BUILD.getProperty("python_setting")
                + " to the Python that has pykbatch, or call spark_udfs.register(spark)", e);
        }
        try {
            try (OutputStream in = p.getOutputStream()) {
                json.writeValue(in, request);
            }
            byte[] answer;
            try (InputStream out = p.getInputStream()) {
                answer = out.readAllBytes();
            }
            if (!p.waitFor(PLAN_SECONDS, java.util.concurrent.TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("kafka-segment: the tiered plan took more than " + PLAN_SECONDS + " s");
            }
            JsonNode plan = answer.length > 0 ? json.readTree(answer) : null;
            if (p.exitValue() != 0 || plan == null || plan.has("error")) {
                String why = plan != null && plan.has("error") ? plan.get("error").asText()
                    : new String(Files.readAllBytes(errors.toPath()), StandardCharsets.UTF_8).trim();
                throw new IllegalArgumentException("kafka-segment: the tiered plan failed: " + why);
            }
            return plan;
        } catch (IOException e) {
            throw new IllegalStateException("kafka-segment: the tiered plan (" + python + " -m spark_udfs.tiered_plan) "
                + "failed: " + e.getMessage(), e);
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IllegalStateException("kafka-segment: interrupted while the tiered plan ran", e);
        } finally {
            errors.delete();
        }
    }

    /** A tiered read's own options, and fsspec's (fs.*) with which its planner reaches the store. */
    static boolean isTieredOption(String key) {
        String k = key.toLowerCase(Locale.ROOT);
        return OPTIONS.contains(k) || k.startsWith("fs.");
    }
}
