package pykbatch.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * How the JVM turns bytes into a String (what kafka-dump-log's StringDecoder prints): reads one
 * hex string per line, prints the decoded text re-encoded as UTF-8 hex (a replacement character
 * comes out as efbfbd).
 */
public final class Utf8Probe {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII))) {
            String line;
            while ((line = in.readLine()) != null) {
                String text = new String(hex.parseHex(line), StandardCharsets.UTF_8);
                System.out.println(hex.formatHex(text.getBytes(StandardCharsets.UTF_8)));
            }
        }
    }
}
