package io.pykbatch.spark;

import com.github.luben.zstd.Zstd;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.GZIPOutputStream;
import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.Snappy;

/**
 * A records payload compressed the way Kafka's producer frames it (pykbatch.codecs.compress): gzip
 * (the JDK), xerial snappy-java's stream (its header, 32 KiB raw blocks), Kafka's LZ4 frame (FLG
 * 0x60, BD 0x40, 64 KiB blocks, the magic-0 header checksum quirk) and zstd (level 3), with the
 * codec libraries Spark ships. Called by the core (kb_jni.c) when kbatch_repair rebuilds a
 * compressed batch.
 */
final class Compressor {
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int LZ4_MAGIC = 0x184D2204;
    private static final int GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4;

    private Compressor() {
    }

    static byte[] compress(int codec, int magic, byte[] data) throws IOException {
        switch (codec) {
            case GZIP: {
                ByteArrayOutputStream out = new ByteArrayOutputStream(data.length / 2 + 64);
                try (GZIPOutputStream gz = new GZIPOutputStream(out, 8 * 1024)) {
                    gz.write(data);
                }
                return out.toByteArray();
            }
            case SNAPPY: {
                ByteArrayOutputStream out = new ByteArrayOutputStream(data.length + 64);
                out.write(XERIAL_MAGIC);
                out.write(ByteBuffer.allocate(8).putInt(1).putInt(1).array());
                for (int i = 0; i < data.length; i += 32 * 1024) {
                    byte[] block = Snappy.rawCompress(java.util.Arrays.copyOfRange(data, i,
                        Math.min(data.length, i + 32 * 1024)), Math.min(data.length - i, 32 * 1024));
                    out.write(ByteBuffer.allocate(4).putInt(block.length).array());
                    out.write(block);
                }
                return out.toByteArray();
            }
            case LZ4:
                return lz4Frame(data, magic);
            case ZSTD:
                return Zstd.compress(data, 3);
            default:
                throw new IllegalArgumentException("unknown codec id " + codec);
        }
    }

    private static byte[] lz4Frame(byte[] data, int magic) {
        LZ4Compressor lz4 = LZ4Factory.fastestInstance().fastCompressor();
        ByteBuffer out = ByteBuffer.allocate(7 + data.length + data.length / 255 + 16 * (data.length / 65536 + 1) + 4)
            .order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(LZ4_MAGIC).put((byte) 0x60).put((byte) 0x40);
        // the header checksum: of FLG and BD; magic 0's over the frame magic too (Kafka's quirk)
        byte[] head = out.array();
        int hash = magic == 0 ? XXHashFactory.fastestInstance().hash32().hash(head, 0, 6, 0)
            : XXHashFactory.fastestInstance().hash32().hash(head, 4, 2, 0);
        out.put((byte) ((hash >> 8) & 0xFF));
        byte[] block = new byte[lz4.maxCompressedLength(64 * 1024)];
        for (int i = 0; i < data.length; i += 64 * 1024) {
            int n = Math.min(64 * 1024, data.length - i);
            int size = lz4.compress(data, i, n, block, 0, block.length);
            if (size >= n) {  // no smaller: the block stored as it is
                out.putInt(n | 0x80000000).put(data, i, n);
            } else {
                out.putInt(size).put(block, 0, size);
            }
        }
        out.putInt(0);
        return java.util.Arrays.copyOf(out.array(), out.position());
    }
}
