package io.pykbatch.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The splits of a kafka-segment read of local files, planned on the driver as the Python source
 * plans them (spark_udfs/segment_plan.py: find_segments, split_points): every {@code <digits>.log}
 * under the path in the order of their paths, the topic and partition from the
 * {@code <topic>-<partition>} folder, each segment cut at batch positions of its {@code .index} about
 * splitBytes apart.
 */
final class SegmentPlan {
    private static final Pattern PARTITION_DIR = Pattern.compile("^(.+)-(\\d+)$");
    private static final String LOG = ".log";

    private SegmentPlan() { }

    /** A local path (a plain path or a file: URL) as a file system path. */
    static String local(String path) {
        return path.startsWith("file://") ? path.substring("file://".length()) : path;
    }

    static boolean isLocal(String path) {
        return !path.contains("://") || path.startsWith("file://");
    }

    /** The splits of the segments under path: a local one's cut at its .index's batch positions, from
     * where its ranges start; one in a store (store not null) whole, as the Python source reads it. */
    static List<SegmentSplit> splits(String path, long splitBytes, SegmentRanges ranges, SegmentStore store) {
        List<String> files = store != null ? store.files(path) : localFiles(path);
        List<SegmentSplit> out = new ArrayList<>();
        for (String file : files) {
            String[] parts = file.split("/", -1);
            String name = parts[parts.length - 1];
            if (!isSegmentLog(name)) {
                continue;
            }
            String parent = parts.length > 1 ? parts[parts.length - 2] : "";
            Matcher m = PARTITION_DIR.matcher(parent);
            String topic = parent;
            int partition = -1;
            if (m.matches()) {
                try {
                    partition = Integer.parseInt(m.group(2));
                    topic = m.group(1);
                } catch (NumberFormatException e) {
                    // a partition number past an int: not a partition folder
                }
            }
            long segment;
            try {
                segment = Long.parseLong(name.substring(0, name.length() - LOG.length()));
            } catch (NumberFormatException e) {
                continue;  // a base offset past a long's: no segment of Kafka's
            }
            out.add(new SegmentSplit(file, topic, partition, segment, 0, -1));
        }
        // each segment's next base offset in its folder (segment_plan.next_base_offsets)
        java.util.Map<String, java.util.TreeSet<Long>> bases = new java.util.HashMap<>();
        for (SegmentSplit s : out) {
            bases.computeIfAbsent(parentOf(s.path), k -> new java.util.TreeSet<>()).add(s.segment);
        }
        List<SegmentSplit> splits = new ArrayList<>();
        for (SegmentSplit s : out) {
            Long next = bases.get(parentOf(s.path)).higher(s.segment);
            long following = next == null ? -1 : next;
            if (!ranges.keepsSegment(s.segment, following)) {
                continue;
            }
            s.follows = s.segment > bases.get(parentOf(s.path)).first();
            if (store != null) {  // no index read remotely: the segment whole
                s.next = following;
                splits.add(s);
                continue;
            }
            long size = new java.io.File(s.path).length();
            long[][] index = size == 0 ? null : SegmentIndexes.read(s.path, SegmentIndexes.OFFSET_INDEX, s.segment);
            long first = size == 0 ? 0 : ranges.startPosition(s.path, s.segment, index);
            List<Long> starts = new ArrayList<>(List.of(first));
            for (long point : size == 0 ? List.<Long>of() : splitPoints(s.path, s.segment, index, size, splitBytes)) {
                if (point > first) {
                    starts.add(point);
                }
            }
            boolean follows = s.segment > bases.get(parentOf(s.path)).first();
            for (int i = 0; i < starts.size(); i++) {
                SegmentSplit split = new SegmentSplit(s.path, s.topic, s.partition, s.segment, starts.get(i),
                    i + 1 < starts.size() ? starts.get(i + 1) : -1);
                split.next = following;
                split.follows = follows;
                split.previous = i > 0 ? starts.get(i - 1) : -1;
                splits.add(split);
            }
        }
        return splits;
    }

    private static String parentOf(String file) {
        int slash = file.lastIndexOf('/');
        return slash < 0 ? "" : file.substring(0, slash);
    }

    private static List<String> localFiles(String path) {
        Path root = Paths.get(local(path));
        if (!Files.exists(root)) {
            throw new UncheckedIOException(new FileNotFoundException("[PATH_NOT_FOUND] Path does not exist: " + path
                + "."));
        }
        try (Stream<Path> walk = Files.isRegularFile(root) ? Stream.of(root) : Files.walk(root)) {
            return walk.filter(Files::isRegularFile).map(Path::toString).sorted().collect(Collectors.toList());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Kafka's segment log name: digits, then .log. */
    static boolean isSegmentLog(String name) {
        if (!name.endsWith(LOG) || name.length() == LOG.length()) {
            return false;
        }
        for (int i = 0; i < name.length() - LOG.length(); i++) {
            if (name.charAt(i) < '0' || name.charAt(i) > '9') {
                return false;
            }
        }
        return true;
    }

    /** Batch positions about splitBytes apart from the segment's offset index (which holds batch
     * positions; segment_plan.split_points), 0 first; without an index (null): 0 alone.  A position
     * is a boundary only where the log confirms an entry starts (Native.indexEntryTrusted): a stale
     * index must not cut a read where no entry starts, nor make its rows depend on splitBytes. */
    static List<Long> splitPoints(String path, long segment, long[][] index, long size, long splitBytes) {
        List<Long> starts = new ArrayList<>();
        starts.add(0L);
        for (int k = 0; index != null && k < index[1].length; k++) {
            long position = index[1][k];
            if (position > 0 && position < size && position - starts.get(starts.size() - 1) >= splitBytes
                    && Native.indexEntryTrusted(path, position, segment, index[0][k])) {
                starts.add(position);
            }
        }
        return starts;
    }

    /** Whether a segment named base, followed in its folder by next (-1: none), can hold an offset in
     * [low, high]: it holds [base, next) (Kafka's log invariant; segment_plan.Ranges.keeps_segment). */
    static boolean holds(long base, long next, long low, long high) {
        return base <= high && (next < 0 || next > low);
    }
}
