package io.pykbatch.spark;

/**
 * tests/test_jvm_native.py: the native methods handed a null array (a magic method Spark calls
 * with a null value, a caller's slip) throw NullPointerException instead of reading through NULL,
 * and handed bounds outside their array throw IndexOutOfBoundsException instead of reading past
 * it -- either would take the JVM down.  Prints how many threw each.
 */
public final class NullArrayProbe {
    public static void main(String[] a) throws Exception {
        long decoder = Native.decoderOpen(true, 1 << 20, new Decompressor(), java.nio.ByteBuffer.allocateDirect(8 * 64));
        java.lang.reflect.Field field = Validator.class.getDeclaredField("handle");
        field.setAccessible(true);
        long validator = (long) field.get(Validator.of(new java.util.HashMap<>()));
        Runnable[] nulls = {
            () -> Native.crc32c(null),
            () -> Native.segmentOpen(null, 0, -1, 1, false, Native.FILL_COLUMNS, 1, new Decompressor(),
                java.nio.ByteBuffer.allocateDirect(8 * 64), new long[5]),
            () -> Native.segmentOpen("/dev/null", 0, -1, 1, false, Native.FILL_COLUMNS, 1, new Decompressor(),
                java.nio.ByteBuffer.allocateDirect(8 * 64), null),
            () -> Native.indexEntryTrusted(null, 8, 0, 0),
            () -> Native.segmentConsumer(0, null),
            () -> Native.avroOpen(null, new int[0], java.nio.ByteBuffer.allocateDirect(64)),
            () -> Native.decodeRow(decoder, null, 0, 0),
            () -> Native.batchInfo(decoder, null, 0, 0),
            () -> Native.readFrame(null, new long[4]),
            () -> Native.readFrame(new byte[5], null),
            () -> Native.repair(validator, null, 0, 0),
        };
        byte[] four = new byte[4];
        Runnable[] bounds = {
            () -> Native.decodeRow(decoder, four, 2, 5),
            () -> Native.batchInfo(decoder, four, -1, 2),
            () -> Native.repair(validator, four, 3, Integer.MAX_VALUE),
            () -> Native.readFrame(four, new long[3]),
        };
        System.out.println("NPE " + count(nulls, NullPointerException.class) + " of " + nulls.length);
        System.out.println("IOOBE " + count(bounds, IndexOutOfBoundsException.class) + " of " + bounds.length);
    }

    private static int count(Runnable[] calls, Class<? extends RuntimeException> expected) {
        int threw = 0;
        for (Runnable call : calls) {
            try {
                call.run();
            } catch (RuntimeException e) {
                threw += expected.isInstance(e) ? 1 : 0;
            }
        }
        return threw;
    }
}
