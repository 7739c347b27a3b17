package pykbatch.harness;

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka's own consumer on partition 0 of a topic, from its start, for a fixed time: how many
 * records it delivered, the highest offset, its position at the end and what it threw.  One JSON
 * line on stdout.  Usage: StuckConsumer BOOTSTRAP TOPIC SECONDS
 */
public final class StuckConsumer {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        TopicPartition tp = new TopicPartition(args[1], 0);
        long deadline = System.nanoTime() + Long.parseLong(args[2]) * 1_000_000_000L;
        long count = 0, max = -1, position;
        TreeMap<String, Integer> thrown = new TreeMap<>();
        String last = "";
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            while (System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        count++;
                        max = Math.max(max, r.offset());
                    }
                } catch (KafkaException e) {
                    thrown.merge(e.getClass().getName(), 1, Integer::sum);
                    last = String.valueOf(e.getMessage());
                }
            }
            position = consumer.position(tp);
        }
        StringBuilder errors = new StringBuilder("{");
        thrown.forEach((k, v) -> errors.append(errors.length() > 1 ? "," : "").append(quote(k)).append(":").append(v));
        System.out.println("{\"count\":" + count + ",\"max_offset\":" + max + ",\"position\":" + position
                + ",\"thrown\":" + errors + "},\"last_error\":" + quote(last) + "}");
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
