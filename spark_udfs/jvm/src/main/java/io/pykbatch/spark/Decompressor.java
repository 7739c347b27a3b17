package io.pykbatch.spark;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;
import net.jpountz.lz4.LZ4Exception;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.SnappyInputStream;

/**
 * The codecs the core calls back for a compressed batch's records (kb_validate_opts.decompress),
 * read the way Kafka's own consumer reads them: the JDK's GZIPInputStream, snappy-java's
 * SnappyInputStream and zstd-jni's stream (Spark's classpath carries both), and Kafka's LZ4 frame
 * (KafkaLZ4BlockInputStream's rules over lz4-java's block decoder).  Never throws to the core: a
 * failure sets {@link #rule}, {@link #offset}, {@link #produced} and a message kept in
 * {@link #messages} (the culprit's args[0] is its index).
 */
final class Decompressor {
    // read by csrc/jni/kb_jni.c after run() returns -1
    String rule;
    long offset;
    int messageIndex;
    int produced;
    final List<String> messages = new ArrayList<>();

    private static final int READ = 16 * 1024;  // Kafka's ChunkedBytesStream reads 16 KiB at a time
    private static final int GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4;

    /** Decompresses src into out (its capacity is the cap); the bytes written, or -1 (fields set). */
    int run(int codec, int magic, ByteBuffer src, ByteBuffer out) {
        out.clear();
        try {
            switch (codec) {
                case GZIP:
                    return drain(new BufferInput(src), in -> new GZIPInputStream(in, 8 * 1024), out);
                case SNAPPY:
                    return drain(new BufferInput(src), SnappyInputStream::new, out);
                case LZ4:
                    return lz4(src, out, magic);
                case ZSTD:
                    long declared = zstdDeclaredSize(src);
                    if (declared != -1 && Long.compareUnsigned(declared, out.capacity()) > 0) {
                        return fail("batch.decompressed_too_large", 0, "Decompressed records declares "
                            + Long.toUnsignedString(declared)
                            + " bytes than the limit of " + out.capacity() + " bytes", 0);
                    }
                    return drain(new BufferInput(src), ZstdInputStreamNoFinalizer::new, out);
                default:
                    return fail("batch.unknown_codec", 0, "Unknown compression type id: " + codec, 0);
            }
        } catch (TooLarge e) {
            return fail("batch.decompressed_too_large", 0,
                "Decompressed records produces more than the limit of " + out.capacity() + " bytes", 0);
        } catch (Failed e) {
            return fail("batch.decompression_failed", e.offset, failedMessage(codec, e.getMessage()), e.produced);
        } catch (IOException | RuntimeException | LinkageError e) {  // a codec library's surprise is a culprit too
            return fail("batch.decompression_failed", 0, failedMessage(codec, String.valueOf(e.getMessage())),
                out.position());
        }
    }

    static String failedMessage(int codec, String cause) {
        String name = Native.codecName(codec);
        return "Failed to decompress " + (name == null ? "unknown(" + codec + ")" : name) + " record stream: " + cause;
    }

    private int fail(String rule, long offset, String message, int produced) {
        this.rule = rule;
        this.offset = offset;
        this.produced = produced;
        this.messageIndex = messages.size();
        messages.add(message);
        return -1;
    }

    private interface Codec {
        InputStream open(InputStream in) throws IOException;
    }

    /** Reads a codec's stream to its end in Kafka's 16 KiB reads; a failing read's output is lost.
     * A stream that ends early fails where the input ran out. */
    private final byte[] chunk = new byte[READ];  // one a decompressor, not one a batch

    private int drain(BufferInput src, Codec codec, ByteBuffer out) throws IOException {
        InputStream opened;
        try {
            opened = codec.open(src);
        } catch (IOException | RuntimeException e) {
            throw new Failed(e instanceof EOFException ? src.consumed() : 0, message(e), 0);
        }
        try (InputStream stream = opened) {
            while (true) {
                int n;
                try {
                    n = stream.read(chunk, 0, chunk.length);
                } catch (IOException | RuntimeException e) {
                    throw new Failed(e instanceof EOFException ? src.consumed() : 0, message(e), out.position());
                }
                if (n < 0) {
                    return out.position();
                }
                if (n > out.remaining()) {
                    throw new TooLarge();
                }
                out.put(chunk, 0, n);
            }
        }
    }

    private static String message(Exception e) {
        return e instanceof EOFException && e.getMessage() == null ? "Unexpected end of ZLIB input stream"
            : String.valueOf(e.getMessage());
    }

    /** The content size the first zstd frame's header declares (unsigned), or -1 when it declares none
     * (pykbatch.codecs.zstd_declared_size). */
    private static long zstdDeclaredSize(ByteBuffer src) {
        ByteBuffer d = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int n = d.remaining();
        if (n < 6 || d.getInt(0) != 0xFD2FB528) {
            return -1;
        }
        int fhd = d.get(4) & 0xff;
        int fcsFlag = fhd >> 6, singleSegment = (fhd >> 5) & 1, dictFlag = fhd & 3;
        int pos = 5 + (singleSegment != 0 ? 0 : 1) + new int[] {0, 1, 2, 4}[dictFlag];
        int size = new int[] {singleSegment != 0 ? 1 : 0, 2, 4, 8}[fcsFlag];
        if (size == 0 || n < pos + size) {
            return -1;
        }
        long value = 0;
        for (int i = size - 1; i >= 0; i--) {
            value = (value << 8) | (d.get(pos + i) & 0xff);
        }
        return size == 2 ? value + 256 : value;
    }

    private static final byte[] LZ4_MAGIC = {0x04, 0x22, 0x4d, 0x18};

    /** Kafka's LZ4 frame: one frame; the header checksum skipped for magic 0 (KAFKA-1493 wrote it
     * over the magic bytes too) and verified otherwise; block checksums verified when flagged; the
     * content checksum never checked; bytes after the end mark ignored. */
    private static int lz4(ByteBuffer src, ByteBuffer out, int magic) {
        ByteBuffer data = src.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int n = data.remaining();
        if (n < 7) {
            throw new Failed(0, "Stream ended prematurely", 0);
        }
        for (int i = 0; i < 4; i++) {
            if (data.get(i) != LZ4_MAGIC[i]) {
                throw new Failed(0, "Stream unsupported (invalid magic bytes)", 0);
            }
        }
        int flg = data.get(4) & 0xff, bd = data.get(5) & 0xff;
        if ((flg & 0x03) != 0) {
            throw new Failed(4, "Reserved bits must be 0", 0);
        }
        if ((flg >> 6) != 1) {
            throw new Failed(4, "Version " + (flg >> 6) + " is unsupported", 0);
        }
        if ((flg & 0x20) == 0) {
            throw new Failed(4, "Dependent block stream is unsupported", 0);
        }
        int sizeCode = (bd >> 4) & 7;
        if ((bd & 0x8f) != 0 || sizeCode < 4) {
            throw new Failed(5, "Block size code must be 4..7 and reserved bits 0", 0);
        }
        int blockMax = 1 << (2 * sizeCode + 8);
        int pos = 6 + ((flg & 0x08) != 0 ? 8 : 0);
        if (n < pos + 1) {
            throw new Failed(n, "Stream ended prematurely", 0);
        }
        XXHash32 xxhash = XXHashFactory.fastestInstance().hash32();
        if (magic > 0) {
            int hash = xxhash.hash(data, 4, pos - 4, 0);
            if ((data.get(pos) & 0xff) != ((hash >> 8) & 0xff)) {
                throw new Failed(pos, "Stream frame descriptor corrupted", 0);
            }
        }
        pos++;
        LZ4SafeDecompressor blocks = LZ4Factory.fastestInstance().safeDecompressor();
        boolean checksums = (flg & 0x10) != 0;
        while (true) {
            if (n - pos < 4) {
                throw new Failed(pos, "Stream ended prematurely", out.position());
            }
            int size = data.getInt(pos);
            pos += 4;
            if (size == 0) {
                return out.position();
            }
            boolean stored = size < 0;
            size &= 0x7fffffff;
            if (size > blockMax) {
                throw new Failed(pos - 4, "Block size " + size + " exceeded max: " + blockMax, out.position());
            }
            if (n - pos < size + (checksums ? 4 : 0)) {
                throw new Failed(pos, "Stream ended prematurely", out.position());
            }
            if (checksums && xxhash.hash(data, pos, size, 0) != data.getInt(pos + size)) {
                throw new Failed(pos + size, "Block checksum mismatch", out.position());
            }
            int room = Math.min(blockMax, out.remaining());
            if (stored) {
                if (size > room) {
                    throw new TooLarge();
                }
                for (int i = 0; i < size; i++) {
                    out.put(data.get(pos + i));
                }
            } else {
                try {
                    int written = blocks.decompress(data, pos, size, out, out.position(), room);
                    out.position(out.position() + written);
                } catch (LZ4Exception e) {
                    if (room < blockMax) {
                        throw new TooLarge();
                    }
                    throw new Failed(pos, String.valueOf(e.getMessage()), out.position());
                }
            }
            pos += size + (checksums ? 4 : 0);
        }
    }

    /** A codec's failure: where in the payload, and what came out before it. */
    private static final class Failed extends RuntimeException {
        final long offset;
        final int produced;

        Failed(long offset, String message, int produced) {
            super(message, null, false, false);
            this.offset = offset;
            this.produced = produced;
        }
    }

    private static final class TooLarge extends RuntimeException {
        TooLarge() {
            super(null, null, false, false);
        }
    }

    /** A ByteBuffer read as a stream, from its position to its limit. */
    private static final class BufferInput extends InputStream {
        private final ByteBuffer buf;
        private final int start;

        BufferInput(ByteBuffer buf) {
            this.buf = buf.duplicate();
            this.start = buf.position();
        }

        long consumed() {
            return buf.position() - start;
        }

        @Override
        public int read() {
            return buf.hasRemaining() ? buf.get() & 0xff : -1;
        }

        @Override
        public int read(byte[] b, int off, int len) {
            if (len == 0) {
                return 0;
            }
            if (!buf.hasRemaining()) {
                return -1;
            }
            int n = Math.min(len, buf.remaining());
            buf.get(b, off, n);
            return n;
        }

        @Override
        public int available() {
            return buf.remaining();
        }
    }
}
