import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer's side of benchmarks/spread_produce.py: the same records as its
 * librdkafka phases (record i to target i mod N, or all to one partition), timed between a
 * "go" line on stdin and the last acknowledgement (the caller reads this JVM's CPU in
 * /proc around it).
 *
 * <p>Arguments: bootstrap, topics (comma-separated), partitions per topic, records,
 * "spread" or "one", value bytes, then producer settings as key=value. Prints "ready" once
 * the metadata of every topic is known and a warm-up of the same load is acknowledged,
 * then one JSON line.
 */
public final class SpreadProducer {
    private static final int WARM_UP = 5000;

    private SpreadProducer() {}

    private static void send(
            KafkaProducer<byte[], byte[]> producer,
            List<String> topics,
            List<Integer> partitions,
            int records,
            boolean spread,
            byte[] value,
            AtomicLong failed) {
        int n = topics.size();
        for (int i = 0; i < records; i++) {
            int t = spread ? i % n : 0;
            producer.send(
                    new ProducerRecord<>(topics.get(t), partitions.get(t), null, value),
                    (metadata, error) -> {
                        if (error != null) {
                            failed.incrementAndGet();
                        }
                    });
        }
    }

    public static void main(String[] args) throws Exception {
        String[] topics = args[1].split(",");
        int perTopic = Integer.parseInt(args[2]);
        int records = Integer.parseInt(args[3]);
        boolean spread = args[4].equals("spread");
        byte[] value = new byte[Integer.parseInt(args[5])];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        List<String> targetTopics = new ArrayList<>();
        List<Integer> targetPartitions = new ArrayList<>();
        for (String topic : topics) {
            for (int p = 0; p < perTopic; p++) {
                targetTopics.add(topic);
                targetPartitions.add(p);
            }
        }
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (String topic : topics) {
                producer.partitionsFor(topic); // metadata first: measure produce, not discovery
            }
            send(producer, targetTopics, targetPartitions, Math.min(records, WARM_UP), spread, value, failed);
            producer.flush(); // a warmed-up JIT: the timed window measures the steady state
            System.out.println("ready");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            if (!"go".equals(in.readLine())) {
                return;
            }
            long start = System.nanoTime();
            send(producer, targetTopics, targetPartitions, records, spread, value, failed);
            producer.flush();
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(
                    "{\"records\": %d, \"seconds\": %.3f, \"failed\": %d}%n", records, seconds, failed.get());
        }
    }
}
