package io.pykbatch.spark;

import java.io.IOException;
import java.io.InputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.sql.SparkSession;

/**
 * Segments in a store Spark reaches through Hadoop's file systems (s3a://, hdfs://, abfs://... --
 * whatever the session's Hadoop configuration serves): listed on the driver, each one spooled to a
 * local temporary file by the task that reads it (bounded memory, as the Python source spools
 * through fsspec) and read there as a local segment.  Serializable: the Hadoop configuration
 * travels with the scan to the executors.
 */
final class SegmentStore implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private transient Configuration conf;

    private SegmentStore(Configuration conf) {
        this.conf = conf;
    }

    /** The store of a remote URL when the active session's Hadoop configuration has a file system
     * for its scheme; null otherwise (a local path, or one only fsspec reads: the Python source's). */
    static SegmentStore of(String path) {
        if (SegmentPlan.isLocal(path) || !SparkSession.getActiveSession().isDefined()) {
            return null;
        }
        Configuration conf = SparkSession.getActiveSession().get().sessionState().newHadoopConf();
        try {
            FileSystem.getFileSystemClass(URI.create(path).getScheme(), conf);
            return new SegmentStore(conf);
        } catch (IOException | RuntimeException | LinkageError e) {
            // "No FileSystem for scheme", or one whose classes are not on the classpath (s3a:// without
            // hadoop-aws): not Spark's to read, fsspec's perhaps
            return null;
        }
    }

    /** Every file under path (a file itself, or a folder's, recursively), as full URLs, in order. */
    List<String> files(String path) {
        org.apache.hadoop.fs.Path root = new org.apache.hadoop.fs.Path(path);
        List<String> out = new ArrayList<>();
        try {
            FileSystem fs = root.getFileSystem(conf);
            if (!fs.exists(root)) {
                throw new UncheckedIOException(new java.io.FileNotFoundException(
                    "[PATH_NOT_FOUND] Path does not exist: " + path + "."));
            }
            RemoteIterator<LocatedFileStatus> it = fs.listFiles(root, true);
            while (it.hasNext()) {
                out.add(it.next().getPath().toString());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-segment: cannot list " + path, e);
        }
        out.sort(null);
        return out;
    }

    /** The names of the folders right under path (none when it is not a folder). */
    List<String> folders(String path) {
        org.apache.hadoop.fs.Path root = new org.apache.hadoop.fs.Path(path);
        List<String> out = new ArrayList<>();
        try {
            FileSystem fs = root.getFileSystem(conf);
            if (fs.getFileStatus(root).isDirectory()) {
                for (org.apache.hadoop.fs.FileStatus child : fs.listStatus(root)) {
                    if (child.isDirectory()) {
                        out.add(child.getPath().getName());
                    }
                }
            }
        } catch (java.io.FileNotFoundException e) {
            return out;  // named by the read that follows
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-segment: cannot list " + path, e);
        }
        return out;
    }

    /** The object at url copied to a new local temporary file (the caller deletes it). */
    Path spool(String url) throws IOException {
        org.apache.hadoop.fs.Path remote = new org.apache.hadoop.fs.Path(url);
        Path local = Files.createTempFile("pykbatch-segment-", ".log");
        try (InputStream in = remote.getFileSystem(conf).open(remote)) {
            Files.copy(in, local, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(local);
            throw e;
        }
        return local;
    }

    /** The byte ranges [a, b) of the object at url (b -1: to its end; an object shorter than b ends
     * the range there, as an object store's ranged read does) joined into a new local temporary file
     * (the caller deletes it). */
    Path spoolRanges(String url, long[] ranges) throws IOException {
        org.apache.hadoop.fs.Path remote = new org.apache.hadoop.fs.Path(url);
        Path local = Files.createTempFile("pykbatch-tiered-", ".log");
        if (ranges.length == 0) {
            return local;  // the plan found the object unreadable (and said so): nothing to read
        }
        byte[] buffer = new byte[1 << 20];
        try (org.apache.hadoop.fs.FSDataInputStream in = remote.getFileSystem(conf).open(remote);
             java.io.OutputStream out = Files.newOutputStream(local)) {
            for (int i = 0; i + 1 < ranges.length; i += 2) {
                try {
                    in.seek(ranges[i]);
                } catch (java.io.EOFException e) {
                    continue;  // past the object's end: no bytes, as a ranged read there gives none
                }
                long left = ranges[i + 1] < 0 ? Long.MAX_VALUE : ranges[i + 1] - ranges[i];
                while (left > 0) {
                    int n = in.read(buffer, 0, (int) Math.min(buffer.length, left));
                    if (n < 0) {
                        break;
                    }
                    out.write(buffer, 0, n);
                    left -= n;
                }
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(local);
            throw e;
        }
        return local;
    }

    /** The settings whose names start with prefix (values as the configuration resolves them). */
    java.util.Map<String, String> settings(String prefix) {
        java.util.Map<String, String> out = new java.util.TreeMap<>();
        for (java.util.Map.Entry<String, String> e : conf) {
            if (e.getKey().startsWith(prefix)) {
                out.put(e.getKey(), conf.get(e.getKey()));
            }
        }
        return out;
    }

    private void writeObject(ObjectOutputStream out) throws IOException {
        out.defaultWriteObject();
        conf.write(out);
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        conf = new Configuration(false);
        conf.readFields(in);
    }
}
