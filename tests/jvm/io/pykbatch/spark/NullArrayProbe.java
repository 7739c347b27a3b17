package io.pykbatch.spark;

/**
 * tests/test_jvm_native.py: the native methods handed a null array (a magic method Spark calls
 * with a null value, a caller's slip) throw NullPointerException instead of reading through NULL,
 * which would take the JVM down.  Prints how many threw it.
 */
public final class NullArrayProbe {
    public static void main(String[] a) {
        Runnable[] calls = {
            () -> Native.crc32c(null),
            () -> Native.segmentOpen(null, 0, -1, 1, false, false, 1, new Decompressor(),
                java.nio.ByteBuffer.allocateDirect(8 * 64)),
            () -> Native.avroOpen(null, new int[0], java.nio.ByteBuffer.allocateDirect(64)),
            () -> Native.decodeRow(Native.decoderOpen(true, 1 << 20, new Decompressor(),
                java.nio.ByteBuffer.allocateDirect(8 * 64)), null, 0, 0),
        };
        int threw = 0;
        for (Runnable call : calls) {
            try {
                call.run();
            } catch (NullPointerException e) {
                threw++;
            }
        }
        System.out.println("NPE " + threw + " of " + calls.length);
    }
}
