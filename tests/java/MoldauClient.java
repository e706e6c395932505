import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Apache Kafka Java client (kafka-clients) as a command line for Moldau's tests.
 *
 * <pre>
 * MoldauClient produce  --bootstrap B --topic T [--count N | --stdin] ...
 * MoldauClient consume  --bootstrap B --topic T [--group G | --partitions all|0,1] ...
 * MoldauClient admin OP --bootstrap B ... [+ OP ...]...   (OPs include the security ones:
 *     create-acl, describe-acls, delete-acls, alter-quota, describe-quotas, upsert-scram,
 *     describe-scram; --config key=value passes security settings such as sasl.jaas.config)
 * MoldauClient txn-copy --bootstrap B --input T --output T2 --group G --transactional-id X ...
 * </pre>
 *
 * Every result is one JSON object per line on stdout ({@code "event"} names it); bytes
 * (keys, values, header values) are base64, null stays null. The client's own log goes to
 * stderr. Exit status: 0 all went well, 1 an operation failed (an {@code "error"} event
 * says which and why), 2 bad usage. {@code --config key=value} (repeatable) passes any
 * client property through; it wins over the options below. {@code produce --throughput R}
 * paces the sends at R records per second (as Kafka's perf tool does).
 *
 * <p>Records on stdin ({@code produce --stdin}), one per line, tab-separated:
 * {@code partition timestamp key value [header-name header-value]...}; partition and
 * timestamp are decimal, all other fields base64 (header names too), {@code -} is null
 * (no partition: the partitioner picks; no timestamp: the producer's clock).
 */
public final class MoldauClient {
    private static final PrintStream OUT = new PrintStream(
            new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
            false, StandardCharsets.UTF_8);
    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder UNB64 = Base64.getDecoder();

    private MoldauClient() {}

    public static void main(String[] argv) {
        int status;
        try {
            if (argv.length == 0) {
                throw new UsageError("usage: MoldauClient produce|consume|admin|txn-copy ...");
            }
            List<String> rest = List.of(argv).subList(1, argv.length);
            switch (argv[0]) {
                case "produce" -> status = produce(new Args(rest));
                case "consume" -> status = consume(new Args(rest));
                case "admin" -> status = admin(rest);
                case "txn-copy" -> status = txnCopy(new Args(rest));
                case "warmup" -> status = warmup();
                default -> throw new UsageError("unknown command " + argv[0]);
            }
        } catch (UsageError e) {
            emit("event", "error", "stage", "usage", "error", "usage", "message", e.getMessage());
            status = 2;
        } catch (Exception e) {
            emitError("main", e, -1);
            status = 1;
        }
        OUT.flush();
        System.exit(status); // the clients' threads are closed; don't wait for stragglers
    }

    // --- produce --------------------------------------------------------------------------

    private static int produce(Args args) throws Exception {
        String topic = args.required("topic");
        List<ProducerRecord<byte[], byte[]>> records = args.flag("stdin")
                ? readRecords(topic)
                : countedRecords(topic, args);
        String transactionalId = args.get("transactional-id", null);
        String ending = args.get("transaction", "commit");
        if (!ending.equals("commit") && !ending.equals("abort")) {
            throw new UsageError("--transaction is commit or abort");
        }
        Properties props = producerProps(args);
        if (transactionalId != null) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        args.applyConfig(props);

        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        long start = System.nanoTime();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        String stage = "init";
        try {
            if (transactionalId != null) {
                stage = "init_transactions";
                producer.initTransactions();
                emit("event", "init_transactions", "ms", millisSince(start));
                stage = "begin_transaction";
                producer.beginTransaction();
            }
            stage = "send";
            double perSecond = Double.parseDouble(args.get("throughput", "0"));
            long sendStart = System.nanoTime();
            for (int i = 0; i < records.size(); i++) {
                if (perSecond > 0) {
                    long due = sendStart + (long) (i * 1e9 / perSecond);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        TimeUnit.NANOSECONDS.sleep(wait);
                    }
                }
                int index = i;
                producer.send(records.get(i), (meta, error) -> {
                    if (error == null) {
                        acked.incrementAndGet();
                        emit("event", "ack", "index", index, "partition", meta.partition(),
                                "offset", meta.offset(), "timestamp", meta.timestamp());
                    } else {
                        failed.incrementAndGet();
                        emitError("send", error, index);
                    }
                });
            }
            stage = "flush";
            producer.flush();
            if (transactionalId != null) {
                stage = ending + "_transaction";
                if (ending.equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                emit("event", stage);
            }
        } catch (Exception e) {
            emitError(stage, e, -1);
            failed.incrementAndGet();
        } finally {
            producer.close(Duration.ofMillis(args.getInt("close-timeout-ms", 10_000)));
        }
        emit("event", "done", "acked", acked.get(), "failed", failed.get(),
                "ms", millisSince(start));
        return failed.get() == 0 && acked.get() == records.size() ? 0 : 1;
    }

    private static Properties producerProps(Args args) {
        Properties props = common(args, "moldau-java-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, args.get("acks", "all"));
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.get("compression", "none"));
        props.put(ProducerConfig.LINGER_MS_CONFIG, args.get("linger-ms", "5"));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, args.get("max-block-ms", "30000"));
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, args.get("delivery-timeout-ms", "60000"));
        String idempotence = args.get("idempotence", null);
        if (idempotence != null) {
            props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotence);
        }
        return props;
    }

    /** {@code --count N}: value {@code <value-prefix><i>}, key {@code <key-prefix><i % keys>}
     * (no key with {@code --keys 0}), every {@code --header name=value} on every record. */
    private static List<ProducerRecord<byte[], byte[]>> countedRecords(String topic, Args args) {
        int count = args.getInt("count", 1);
        int keys = args.getInt("keys", 10);
        String keyPrefix = args.get("key-prefix", "key-");
        String valuePrefix = args.get("value-prefix", "value-");
        Integer partition = args.has("partition") ? args.getInt("partition", 0) : null;
        List<Header> headers = new ArrayList<>();
        for (String header : args.all("header")) {
            String[] kv = splitPair(header, "--header");
            headers.add(new RecordHeader(kv[0], utf8(kv[1])));
        }
        headers = List.copyOf(headers); // each record copies it into headers of its own
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            byte[] key = keys == 0 ? null : utf8(keyPrefix + (i % keys));
            records.add(new ProducerRecord<>(topic, partition, null, key, utf8(valuePrefix + i),
                    headers));
        }
        return records;
    }

    private static List<ProducerRecord<byte[], byte[]>> readRecords(String topic) throws Exception {
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f.length < 4 || f.length % 2 != 0) {
                throw new UsageError("a stdin record has 4 + 2n tab-separated fields: " + line);
            }
            List<Header> headers = new ArrayList<>();
            for (int h = 4; h < f.length; h += 2) {
                headers.add(new RecordHeader(new String(unb64(f[h]), StandardCharsets.UTF_8),
                        unb64(f[h + 1])));
            }
            Integer partition = f[0].equals("-") ? null : Integer.valueOf(f[0]);
            Long timestamp = f[1].equals("-") ? null : Long.valueOf(f[1]);
            records.add(new ProducerRecord<>(topic, partition, timestamp, unb64(f[2]), unb64(f[3]),
                    headers));
        }
        return records;
    }

    // --- consume --------------------------------------------------------------------------

    /**
     * With {@code --group} it subscribes (and reports assignments); otherwise it assigns
     * {@code --partitions} ({@code all} by default). It stops at {@code --max-records},
     * at {@code --until-end} (every partition's end offset as it was at the start), when
     * stdin closes or says {@code stop} ({@code --stdin-control}), or at {@code --timeout-ms}.
     */
    private static int consume(Args args) throws Exception {
        String topic = args.required("topic");
        String group = args.get("group", null);
        long maxRecords = args.getLong("max-records", Long.MAX_VALUE);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(args.getLong("timeout-ms", 60_000));
        String commit = args.get("commit", "none");
        if (!List.of("none", "sync", "async").contains(commit)) {
            throw new UsageError("--commit is none, sync or async");
        }
        Properties props = common(args, "moldau-java-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, args.flag("from-earliest") ? "earliest" : "latest");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, args.get("isolation", "read_uncommitted"));
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        args.applyConfig(props);

        long count = 0;
        String reason = "timeout";
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        AtomicBoolean stopped = new AtomicBoolean();
        if (args.flag("stdin-control")) {
            watchStdin(consumer, stopped);
        }
        try {
            Map<TopicPartition, Long> ends = null;
            if (group != null) {
                consumer.subscribe(List.of(topic), new Reporter());
            } else {
                List<TopicPartition> partitions = partitionsOf(consumer, topic, args.get("partitions", "all"));
                consumer.assign(partitions);
                emit("event", "assigned", "partitions", names(partitions));
                if (args.flag("until-end")) {
                    ends = consumer.endOffsets(partitions, Duration.ofMillis(30_000));
                }
            }
            while (true) {
                if (count >= maxRecords) {
                    reason = "max-records";
                    break;
                }
                if (ends != null && reachedEnds(consumer, ends)) {
                    reason = "end";
                    break;
                }
                if (stopped.get()) {
                    reason = "stop";
                    break;
                }
                if (System.nanoTime() > deadline) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> batch;
                try {
                    batch = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    continue; // stdin asked us to stop: the loop's next check says so
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    emitRecord(r);
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                    if (++count >= maxRecords) {
                        break; // the rest of this poll is neither reported nor committed
                    }
                }
                if (!offsets.isEmpty() && !commit.equals("none")) {
                    if (commit.equals("sync")) {
                        try {
                            consumer.commitSync(offsets);
                            emit("event", "committed", "offsets", offsetsJson(offsets));
                        } catch (RebalanceInProgressException | CommitFailedException e) {
                            // What an application lives with: these records may come again.
                            emit("event", "commit_failed", "error", e.getClass().getName(),
                                    "message", String.valueOf(e.getMessage()));
                        }
                    } else {
                        consumer.commitAsync(offsets, (done, error) -> {
                            if (error != null) {
                                emitError("commit", error, -1);
                            }
                        });
                    }
                }
                OUT.flush();
            }
        } catch (Exception e) {
            emitError("consume", e, -1);
            reason = "error";
        } finally {
            consumer.close(Duration.ofMillis(args.getInt("close-timeout-ms", 10_000)));
        }
        emit("event", "done", "records", count, "reason", reason);
        return reason.equals("error") ? 1 : 0;
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> consumer, String topic, String spec) {
        List<TopicPartition> out = new ArrayList<>();
        if (spec.equals("all")) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(30_000));
            for (PartitionInfo info : infos) {
                out.add(new TopicPartition(topic, info.partition()));
            }
            out.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        } else {
            for (String p : spec.split(",")) {
                out.add(new TopicPartition(topic, Integer.parseInt(p.trim())));
            }
        }
        return out;
    }

    private static boolean reachedEnds(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
            if (consumer.position(end.getKey()) < end.getValue()) {
                return false;
            }
        }
        return true;
    }

    /** A daemon thread that wakes the consumer up once stdin says "stop" or closes. */
    private static void watchStdin(KafkaConsumer<?, ?> consumer, AtomicBoolean stopped) {
        Thread t = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                for (String line = in.readLine(); line != null && !line.trim().equals("stop"); line = in.readLine()) {
                    // anything else is ignored
                }
            } catch (Exception e) {
                // a broken stdin means stop as well
            }
            stopped.set(true);
            consumer.wakeup();
        }, "stdin-control");
        t.setDaemon(true);
        t.start();
    }

    private static final class Reporter implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            emit("event", "assigned", "partitions", names(partitions));
            OUT.flush();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            emit("event", "revoked", "partitions", names(partitions));
            OUT.flush();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            emit("event", "lost", "partitions", names(partitions));
            OUT.flush();
        }
    }

    private static void emitRecord(ConsumerRecord<byte[], byte[]> r) {
        List<Object> headers = new ArrayList<>();
        for (Header h : r.headers()) {
            headers.add(List.of(h.key(), h.value() == null ? Json.NULL : b64(h.value())));
        }
        emit("event", "record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                "timestamp", r.timestamp(), "timestamp_type", r.timestampType().name,
                "leader_epoch", r.leaderEpoch().orElse(null),
                "key", b64(r.key()), "value", b64(r.value()), "headers", headers);
    }

    // --- txn-copy -------------------------------------------------------------------------

    /**
     * Consume-transform-produce exactly once: read {@code --input} (read_committed) in group
     * {@code --group}, write each record to the same partition of {@code --output} with its
     * value upper-cased ({@code --transform upper}) or unchanged, and commit the consumed
     * offsets in the same transaction ({@code sendOffsetsToTransaction}). Every
     * {@code --abort-every} n-th transaction is aborted instead and its input re-read.
     */
    private static int txnCopy(Args args) throws Exception {
        String input = args.required("input");
        String output = args.required("output");
        String group = args.required("group");
        boolean upper = args.get("transform", "identity").equals("upper");
        int abortEvery = args.getInt("abort-every", 0);
        long maxRecords = args.getLong("max-records", Long.MAX_VALUE);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(args.getLong("timeout-ms", 60_000));

        Properties cprops = common(args, "moldau-java-txn-consumer");
        cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cprops.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Properties pprops = producerProps(args);
        pprops.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args.required("transactional-id"));
        args.applyConfig(cprops);
        args.applyConfig(pprops);

        long start = System.nanoTime();
        long copied = 0;
        int transactions = 0;
        String stage = "init_transactions";
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pprops);
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            producer.initTransactions();
            emit("event", "init_transactions", "ms", millisSince(start));
            stage = "consume";
            consumer = new KafkaConsumer<>(cprops);
            consumer.subscribe(List.of(input), new Reporter());
            while (copied < maxRecords && System.nanoTime() < deadline) {
                stage = "consume";
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) {
                    continue;
                }
                stage = "transaction";
                producer.beginTransaction();
                Map<TopicPartition, Long> firsts = new HashMap<>();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    firsts.putIfAbsent(tp, r.offset());
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    byte[] value = upper && r.value() != null
                            ? new String(r.value(), StandardCharsets.UTF_8).toUpperCase(Locale.ROOT)
                                    .getBytes(StandardCharsets.UTF_8)
                            : r.value();
                    producer.send(new ProducerRecord<>(output, r.partition(), r.timestamp(), r.key(),
                            value, r.headers()));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                transactions++;
                if (abortEvery > 0 && transactions % abortEvery == 0) {
                    producer.abortTransaction();
                    firsts.forEach(consumer::seek); // re-read what the aborted transaction held
                    emit("event", "aborted", "records", batch.count(), "offsets", offsetsJson(offsets));
                } else {
                    producer.commitTransaction();
                    copied += batch.count();
                    emit("event", "committed", "records", batch.count(), "offsets", offsetsJson(offsets));
                }
                OUT.flush();
            }
        } catch (Exception e) {
            emitError(stage, e, -1);
            return finishCopy(args, producer, consumer, copied, transactions, start, 1);
        }
        return finishCopy(args, producer, consumer, copied, transactions, start, 0);
    }

    private static int finishCopy(Args args, KafkaProducer<?, ?> producer, KafkaConsumer<?, ?> consumer,
            long copied, int transactions, long start, int status) {
        Duration timeout = Duration.ofMillis(args.getInt("close-timeout-ms", 10_000));
        if (consumer != null) {
            consumer.close(timeout);
        }
        producer.close(timeout);
        emit("event", "done", "copied", copied, "transactions", transactions, "ms", millisSince(start));
        return status;
    }

    // --- admin ----------------------------------------------------------------------------

    /**
     * {@code admin OP [options] [+ OP [options]]...}: the operations run in order on one
     * admin client (made with the first one's options); each prints one event named after
     * it, or an error event, and a failed one does not stop the next.
     */
    private static int admin(List<String> argv) throws Exception {
        List<List<String>> ops = new ArrayList<>();
        ops.add(new ArrayList<>());
        for (String token : argv) {
            if (token.equals("+")) {
                ops.add(new ArrayList<>());
            } else {
                ops.get(ops.size() - 1).add(token);
            }
        }
        List<Args> parsed = new ArrayList<>();
        for (List<String> op : ops) {
            if (op.isEmpty()) {
                throw new UsageError("admin OP [options] [+ OP [options]]...");
            }
            parsed.add(new Args(op.subList(1, op.size())));
        }
        Args first = parsed.get(0);
        Properties props = common(first, "moldau-java-admin");
        String timeout = first.get("timeout-ms", "30000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeout);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeout); // at most the above
        first.applyConfig(props);
        int status = 0;
        try (Admin admin = Admin.create(props)) {
            for (int i = 0; i < ops.size(); i++) {
                String op = ops.get(i).get(0);
                try {
                    Map<String, Object> event = Json.obj("event", op);
                    event.putAll(adminOp(admin, op, parsed.get(i)));
                    emit(event);
                } catch (ExecutionException e) {
                    emitError(op, e.getCause(), -1);
                    status = 1;
                }
            }
        }
        return status;
    }

    private static Map<String, Object> adminOp(Admin admin, String op, Args args) throws Exception {
        return switch (op) {
            case "create-topic" -> createTopic(admin, args);
            case "delete-topic" -> {
                admin.deleteTopics(args.all("topic")).all().get();
                yield Json.obj("deleted", args.all("topic"));
            }
            case "describe-topics" -> describeTopics(admin, args.all("topic"), args.all("id"));
            case "describe-cluster" -> describeCluster(admin);
            case "list-groups" -> listGroups(admin);
            case "describe-groups" -> describeGroups(admin, args.all("group"));
            case "list-group-offsets" -> listGroupOffsets(admin, args.required("group"));
            case "alter-configs" -> alterConfigs(admin, args);
            case "describe-configs" -> describeConfigs(admin, args);
            case "list-offsets" -> listOffsets(admin, args.required("topic"), args.get("spec", "latest"));
            case "create-acl" -> createAcl(admin, args);
            case "describe-acls" -> describeAcls(admin, args);
            case "delete-acls" -> deleteAcls(admin, args);
            case "alter-quota" -> alterQuota(admin, args);
            case "describe-quotas" -> describeQuotas(admin);
            case "upsert-scram" -> upsertScram(admin, args);
            case "describe-scram" -> describeScram(admin);
            case "describe-features" -> describeFeatures(admin);
            case "update-features" -> updateFeatures(admin, args);
            case "describe-log-dirs" -> describeLogDirs(admin, args.getInt("broker", 1));
            case "alter-replica-log-dir" -> alterReplicaLogDir(admin, args);
            default -> throw new UsageError("unknown admin operation '" + op + "'");
        };
    }

    private static Map<String, Object> createTopic(Admin admin, Args args) throws Exception {
        String name = args.required("topic");
        NewTopic topic = new NewTopic(name,
                args.has("partitions") ? Optional.of(args.getInt("partitions", 1)) : Optional.empty(),
                args.has("replication-factor")
                        ? Optional.of((short) args.getInt("replication-factor", 1)) : Optional.empty());
        Map<String, String> configs = new TreeMap<>();
        for (String kv : args.all("topic-config")) {
            String[] pair = splitPair(kv, "--topic-config");
            configs.put(pair[0], pair[1]);
        }
        topic.configs(configs);
        var result = admin.createTopics(List.of(topic));
        result.all().get();
        return Json.obj("topic", name, "topic_id", result.topicId(name).get().toString(),
                "partitions", result.numPartitions(name).get(),
                "replication_factor", (int) result.replicationFactor(name).get());
    }

    /** By {@code --topic} name or by {@code --id} (topic ids, as printed), in that order. */
    private static Map<String, Object> describeTopics(Admin admin, List<String> names, List<String> ids)
            throws Exception {
        List<TopicDescription> found = new ArrayList<>();
        if (!names.isEmpty()) {
            Map<String, TopicDescription> byName = admin.describeTopics(names).allTopicNames().get();
            names.forEach(name -> found.add(byName.get(name)));
        }
        if (!ids.isEmpty()) {
            List<Uuid> uuids = ids.stream().map(Uuid::fromString).toList();
            Map<Uuid, TopicDescription> byId =
                    admin.describeTopics(TopicCollection.ofTopicIds(uuids)).allTopicIds().get();
            uuids.forEach(id -> found.add(byId.get(id)));
        }
        List<Object> out = new ArrayList<>();
        for (TopicDescription d : found) {
            List<Object> partitions = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                partitions.add(Json.obj("partition", p.partition(), "leader", nodeId(p.leader()),
                        "replicas", nodeIds(p.replicas()), "isr", nodeIds(p.isr())));
            }
            out.add(Json.obj("name", d.name(), "internal", d.isInternal(),
                    "topic_id", d.topicId().toString(), "partitions", partitions));
        }
        return Json.obj("topics", out);
    }

    private static Map<String, Object> describeLogDirs(Admin admin, int broker) throws Exception {
        Map<String, Object> dirs = new TreeMap<>();
        var described = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
        for (var entry : described.entrySet()) {
            LogDirDescription d = entry.getValue();
            List<Object> replicas = new ArrayList<>();
            for (var r : d.replicaInfos().entrySet()) {
                ReplicaInfo info = r.getValue();
                replicas.add(Json.obj("topic", r.getKey().topic(), "partition", r.getKey().partition(),
                        "size", info.size(), "offset_lag", info.offsetLag(), "future", info.isFuture()));
            }
            dirs.put(entry.getKey(), Json.obj(
                    "error", d.error() == null ? null : d.error().getClass().getSimpleName(),
                    "total_bytes", d.totalBytes().orElse(-1), "usable_bytes", d.usableBytes().orElse(-1),
                    "replicas", replicas));
        }
        return Json.obj("broker", broker, "dirs", dirs);
    }

    private static Map<String, Object> alterReplicaLogDir(Admin admin, Args args) throws Exception {
        TopicPartitionReplica replica = new TopicPartitionReplica(args.required("topic"),
                args.getInt("partition", 0), args.getInt("broker", 1));
        admin.alterReplicaLogDirs(Map.of(replica, args.required("dir"))).all().get();
        var now = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
        return Json.obj("current_dir", now.getCurrentReplicaLogDir(),
                "future_dir", now.getFutureReplicaLogDir());
    }

    private static Map<String, Object> describeCluster(Admin admin) throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        List<Object> nodes = new ArrayList<>();
        for (Node n : r.nodes().get()) {
            nodes.add(Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
        }
        return Json.obj("cluster_id", r.clusterId().get(), "controller", nodeId(r.controller().get()),
                "nodes", nodes);
    }

    private static Map<String, Object> listGroups(Admin admin) throws Exception {
        List<Object> out = new ArrayList<>();
        for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
            out.add(Json.obj("group", g.groupId(), "simple", g.isSimpleConsumerGroup(),
                    "state", g.state().map(Object::toString).orElse(null)));
        }
        return Json.obj("groups", out);
    }

    private static Map<String, Object> describeGroups(Admin admin, List<String> groups) throws Exception {
        Map<String, ConsumerGroupDescription> found = admin.describeConsumerGroups(groups).all().get();
        List<Object> out = new ArrayList<>();
        for (String id : groups) {
            ConsumerGroupDescription d = found.get(id);
            List<Object> members = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                members.add(Json.obj("member_id", m.consumerId(), "client_id", m.clientId(),
                        "host", m.host(), "instance_id", m.groupInstanceId().orElse(null),
                        "assignment", names(m.assignment().topicPartitions())));
            }
            out.add(Json.obj("group", d.groupId(), "state", d.state().toString(),
                    "simple", d.isSimpleConsumerGroup(), "assignor", d.partitionAssignor(),
                    "coordinator", nodeId(d.coordinator()), "members", members));
        }
        return Json.obj("groups", out);
    }

    private static Map<String, Object> listGroupOffsets(Admin admin, String group) throws Exception {
        return Json.obj("group", group, "offsets",
                offsetsJson(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
    }

    /** {@code --topic T}, or {@code --broker ID} ({@code --broker default}: the cluster default). */
    private static ConfigResource configResource(Args args) {
        if (args.has("broker")) {
            String broker = args.required("broker");
            return new ConfigResource(ConfigResource.Type.BROKER, broker.equals("default") ? "" : broker);
        }
        return new ConfigResource(ConfigResource.Type.TOPIC, args.required("topic"));
    }

    /** {@code --set key=value}, {@code --delete key}, {@code --append key=v},
     * {@code --subtract key=v} on a topic or broker, incrementally. */
    private static Map<String, Object> alterConfigs(Admin admin, Args args) throws Exception {
        ConfigResource resource = configResource(args);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String kv : args.all("set")) {
            String[] pair = splitPair(kv, "--set");
            ops.add(new AlterConfigOp(new ConfigEntry(pair[0], pair[1]), AlterConfigOp.OpType.SET));
        }
        for (String key : args.all("delete")) {
            ops.add(new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE));
        }
        for (String kv : args.all("subtract")) {
            String[] pair = splitPair(kv, "--subtract");
            ops.add(new AlterConfigOp(new ConfigEntry(pair[0], pair[1]), AlterConfigOp.OpType.SUBTRACT));
        }
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        return Json.obj("resource", resource.name(), "altered", ops.size());
    }

    /** Configs of {@code --topic T} or {@code --broker ID}, with sources and synonyms. */
    private static Map<String, Object> describeConfigs(Admin admin, Args args) throws Exception {
        ConfigResource resource = configResource(args);
        DescribeConfigsOptions options = new DescribeConfigsOptions().includeSynonyms(true);
        Config config = admin.describeConfigs(List.of(resource), options).all().get().get(resource);
        Map<String, Object> entries = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            List<Object> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                synonyms.add(Json.obj("name", s.name(), "value", s.value(), "source", s.source().name()));
            }
            entries.put(e.name(), Json.obj("value", e.value(), "source", e.source().name(),
                    "read_only", e.isReadOnly(), "sensitive", e.isSensitive(), "synonyms", synonyms));
        }
        return Json.obj("resource", resource.name(), "topic", resource.name(), "configs", entries);
    }

    // --- features ----------------------------------------------------------------------------

    private static Map<String, Object> describeFeatures(Admin admin) throws Exception {
        FeatureMetadata meta = admin.describeFeatures().featureMetadata().get();
        Map<String, Object> supported = new TreeMap<>();
        meta.supportedFeatures().forEach((name, range) ->
                supported.put(name, List.of((int) range.minVersion(), (int) range.maxVersion())));
        Map<String, Object> finalized = new TreeMap<>();
        meta.finalizedFeatures().forEach((name, range) ->
                finalized.put(name, List.of((int) range.minVersionLevel(), (int) range.maxVersionLevel())));
        return Json.obj("supported", supported, "finalized", finalized,
                "epoch", meta.finalizedFeaturesEpoch().orElse(-1L));
    }

    /** {@code --feature NAME --level N [--type upgrade|safe_downgrade|unsafe_downgrade]
     * [--validate-only true]}. */
    private static Map<String, Object> updateFeatures(Admin admin, Args args) throws Exception {
        String name = args.required("feature");
        FeatureUpdate.UpgradeType type = FeatureUpdate.UpgradeType.valueOf(
                args.get("type", "upgrade").toUpperCase(java.util.Locale.ROOT));
        FeatureUpdate update = new FeatureUpdate((short) args.getInt("level", 0), type);
        UpdateFeaturesOptions options = new UpdateFeaturesOptions()
                .validateOnly(Boolean.parseBoolean(args.get("validate-only", "false")));
        admin.updateFeatures(Map.of(name, update), options).all().get();
        return Json.obj("feature", name, "level", args.getInt("level", 0));
    }

    // --- security: ACLs, client quotas, SCRAM users --------------------------------------

    /** {@code --resource-type T --name N [--pattern LITERAL] --principal P [--host H]
     * --operation OP [--permission ALLOW]}. */
    private static Map<String, Object> createAcl(Admin admin, Args args) throws Exception {
        AclBinding binding = new AclBinding(
                new ResourcePattern(ResourceType.fromString(args.required("resource-type")),
                        args.required("name"), PatternType.fromString(args.get("pattern", "LITERAL"))),
                new AccessControlEntry(args.required("principal"), args.get("host", "*"),
                        AclOperation.fromString(args.required("operation")),
                        AclPermissionType.fromString(args.get("permission", "ALLOW"))));
        admin.createAcls(List.of(binding)).all().get();
        return Json.obj("created", binding.toString());
    }

    /** {@code [--resource-type T] [--name N] [--pattern ANY|MATCH|...] [--principal P]}. */
    private static AclBindingFilter aclFilter(Args args) {
        return new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.fromString(args.get("resource-type", "ANY")),
                        args.get("name", null), PatternType.fromString(args.get("pattern", "ANY"))),
                new AccessControlEntryFilter(args.get("principal", null), null, AclOperation.ANY,
                        AclPermissionType.ANY));
    }

    private static Map<String, Object> aclJson(AclBinding b) {
        return Json.obj("resource_type", b.pattern().resourceType().name(), "name", b.pattern().name(),
                "pattern", b.pattern().patternType().name(), "principal", b.entry().principal(),
                "host", b.entry().host(), "operation", b.entry().operation().name(),
                "permission", b.entry().permissionType().name());
    }

    private static Map<String, Object> describeAcls(Admin admin, Args args) throws Exception {
        List<Object> out = new ArrayList<>();
        for (AclBinding b : admin.describeAcls(aclFilter(args)).values().get()) {
            out.add(aclJson(b));
        }
        return Json.obj("acls", out);
    }

    private static Map<String, Object> deleteAcls(Admin admin, Args args) throws Exception {
        List<Object> out = new ArrayList<>();
        for (AclBinding b : admin.deleteAcls(List.of(aclFilter(args))).all().get()) {
            out.add(aclJson(b));
        }
        return Json.obj("deleted", out);
    }

    /** {@code --entity type=name (or type= for the default) ... --set key=value --remove key}. */
    private static Map<String, Object> alterQuota(Admin admin, Args args) throws Exception {
        Map<String, String> entity = new HashMap<>();
        for (String kv : args.all("entity")) {
            String[] pair = splitPair(kv, "--entity");
            entity.put(pair[0], pair[1].isEmpty() ? null : pair[1]);
        }
        List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
        for (String kv : args.all("set")) {
            String[] pair = splitPair(kv, "--set");
            ops.add(new ClientQuotaAlteration.Op(pair[0], Double.parseDouble(pair[1])));
        }
        for (String key : args.all("remove")) {
            ops.add(new ClientQuotaAlteration.Op(key, null));
        }
        admin.alterClientQuotas(List.of(new ClientQuotaAlteration(new ClientQuotaEntity(entity), ops)))
                .all().get();
        return Json.obj("altered", ops.size());
    }

    private static Map<String, Object> describeQuotas(Admin admin) throws Exception {
        List<Object> out = new ArrayList<>();
        admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().forEach((entity, values) ->
                out.add(Json.obj("entity", new TreeMap<>(entity.entries()), "values", new TreeMap<>(values))));
        return Json.obj("quotas", out);
    }

    /** {@code --user U --password P [--mechanism SCRAM-SHA-256] [--iterations 4096]}. */
    private static Map<String, Object> upsertScram(Admin admin, Args args) throws Exception {
        ScramMechanism mechanism = ScramMechanism.fromMechanismName(args.get("mechanism", "SCRAM-SHA-256"));
        admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(args.required("user"),
                new ScramCredentialInfo(mechanism, args.getInt("iterations", 4096)),
                args.required("password")))).all().get();
        return Json.obj("user", args.required("user"), "mechanism", mechanism.mechanismName());
    }

    private static Map<String, Object> describeScram(Admin admin) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (UserScramCredentialsDescription d : admin.describeUserScramCredentials().all().get().values()) {
            List<Object> infos = new ArrayList<>();
            for (ScramCredentialInfo info : d.credentialInfos()) {
                infos.add(Json.obj("mechanism", info.mechanism().mechanismName(), "iterations", info.iterations()));
            }
            out.put(d.name(), infos);
        }
        return Json.obj("users", out);
    }

    /** {@code --spec earliest|latest|max-timestamp|<timestamp ms>} for every partition. */
    private static Map<String, Object> listOffsets(Admin admin, String topic, String spec) throws Exception {
        OffsetSpec offsetSpec = switch (spec) {
            case "earliest" -> OffsetSpec.earliest();
            case "latest" -> OffsetSpec.latest();
            case "max-timestamp" -> OffsetSpec.maxTimestamp();
            default -> OffsetSpec.forTimestamp(Long.parseLong(spec));
        };
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (TopicPartitionInfo p : d.partitions()) {
            request.put(new TopicPartition(topic, p.partition()), offsetSpec);
        }
        Map<String, Object> out = new TreeMap<>((a, b) -> Integer.compare(Integer.parseInt(a), Integer.parseInt(b)));
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                : admin.listOffsets(request).all().get().entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info = e.getValue();
            out.put(Integer.toString(e.getKey().partition()), Json.obj("offset", info.offset(),
                    "timestamp", info.timestamp(), "leader_epoch", info.leaderEpoch().orElse(null)));
        }
        return Json.obj("topic", topic, "spec", spec, "offsets", out);
    }

    // --- warmup ---------------------------------------------------------------------------

    /**
     * Make a producer, a consumer and an admin client that reach nothing (port 1) and close
     * them: run once with {@code -XX:ArchiveClassesAtExit}, it puts their classes in a
     * class-data archive that makes every later JVM start about a second sooner.
     */
    private static int warmup() {
        Args args = new Args(List.of("--bootstrap", "127.0.0.1:1", "--max-block-ms", "1",
                "--compression", "zstd"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(args))) {
            producer.send(new ProducerRecord<>("warmup", new byte[1]), (meta, error) -> { });
        }
        Properties cprops = common(args, "moldau-java-warmup");
        cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cprops)) {
            consumer.assign(List.of(new TopicPartition("warmup", 0)));
            consumer.poll(Duration.ZERO);
        }
        Properties aprops = common(args, "moldau-java-warmup");
        aprops.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "100");
        aprops.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "100");
        try (Admin admin = Admin.create(aprops)) {
            admin.describeCluster().clusterId().get();
        } catch (ExecutionException | InterruptedException e) {
            // nothing listens on port 1: the classes are loaded all the same
        }
        emit("event", "warmup");
        return 0;
    }

    // --- shared ---------------------------------------------------------------------------

    private static Properties common(Args args, String clientId) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args.required("bootstrap"));
        props.put("client.id", args.get("client-id", clientId));
        return props;
    }

    private static List<String> names(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add(tp.topic() + ":" + tp.partition());
        }
        out.sort(null);
        return out;
    }

    private static Map<String, Object> offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.topic() + ":" + tp.partition(),
                om == null ? null : om.offset()));
        return out;
    }

    private static Object nodeId(Node node) {
        return node == null ? null : node.id();
    }

    private static List<Integer> nodeIds(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    private static String[] splitPair(String kv, String option) {
        int eq = kv.indexOf('=');
        if (eq < 0) {
            throw new UsageError(option + " takes key=value, not " + kv);
        }
        return new String[] {kv.substring(0, eq), kv.substring(eq + 1)};
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static Object b64(byte[] bytes) {
        return bytes == null ? null : B64.encodeToString(bytes);
    }

    private static byte[] unb64(String field) {
        return field.equals("-") ? null : UNB64.decode(field);
    }

    private static long millisSince(long startNanos) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
    }

    private static void emitError(String stage, Throwable error, int index) {
        Map<String, Object> event = Json.obj("event", "error", "stage", stage,
                "error", error.getClass().getName(), "message", String.valueOf(error.getMessage()));
        if (error.getCause() != null) {
            event.put("cause", error.getCause().getClass().getName());
            event.put("cause_message", String.valueOf(error.getCause().getMessage()));
        }
        if (index >= 0) {
            event.put("index", index);
        }
        emit(event);
        OUT.flush();
    }

    private static void emit(Object... pairs) {
        emit(Json.obj(pairs));
    }

    /** One JSON line; callbacks run on the client's threads, hence the lock. */
    private static void emit(Map<String, Object> event) {
        String line = Json.write(event);
        synchronized (OUT) {
            OUT.println(line);
        }
    }

    private static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    /** {@code --name value} options (repeatable), and {@code --name} alone for flags. */
    private static final class Args {
        private final Map<String, List<String>> values = new HashMap<>();

        Args(List<String> argv) {
            for (int i = 0; i < argv.size(); i++) {
                if (!argv.get(i).startsWith("--")) {
                    throw new UsageError("expected an --option, got " + argv.get(i));
                }
                String name = argv.get(i).substring(2);
                String value = "true";
                if (i + 1 < argv.size() && !argv.get(i + 1).startsWith("--")) {
                    value = argv.get(++i);
                }
                values.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
            }
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        boolean flag(String name) {
            return Boolean.parseBoolean(get(name, "false"));
        }

        String get(String name, String fallback) {
            List<String> v = values.get(name);
            return v == null ? fallback : v.get(v.size() - 1);
        }

        String required(String name) {
            String v = get(name, null);
            if (v == null) {
                throw new UsageError("--" + name + " is required");
            }
            return v;
        }

        int getInt(String name, int fallback) {
            return Integer.parseInt(get(name, Integer.toString(fallback)));
        }

        long getLong(String name, long fallback) {
            return Long.parseLong(get(name, Long.toString(fallback)));
        }

        List<String> all(String name) {
            return values.getOrDefault(name, List.of());
        }

        void applyConfig(Properties props) {
            for (String kv : all("config")) {
                String[] pair = splitPair(kv, "--config");
                props.put(pair[0], pair[1]);
            }
        }
    }

    /** Just enough JSON for our events: maps, lists, strings, numbers, booleans, null. */
    private static final class Json {
        static final Object NULL = new Object();

        static Map<String, Object> obj(Object... pairs) {
            Map<String, Object> m = new LinkedHashMap<>();
            for (int i = 0; i < pairs.length; i += 2) {
                m.put((String) pairs[i], pairs[i + 1]);
            }
            return m;
        }

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(value, out);
            return out.toString();
        }

        private static void write(Object value, StringBuilder out) {
            if (value == null || value == NULL) {
                out.append("null");
            } else if (value instanceof String s) {
                string(s, out);
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else if (value instanceof Map<?, ?> m) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    string(String.valueOf(e.getKey()), out);
                    out.append(':');
                    write(e.getValue(), out);
                }
                out.append('}');
            } else if (value instanceof Collection<?> c) {
                out.append('[');
                boolean first = true;
                for (Object item : c) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    write(item, out);
                }
                out.append(']');
            } else {
                string(value.toString(), out);
            }
        }

        private static void string(String s, StringBuilder out) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }
    }
}
