// Reproduces docs/findings/v5-stale-last-message-id.md with Pulsar's own Java client: the v5 API
// (pulsar-client-v5) commits, and the client's v4 layer (PulsarClientImpl's segment methods, which
// the v5 client itself uses) asks the segment for its last message id (GET_LAST_MESSAGE_ID) and
// reads it with a Reader. Written by txnbench (not fetched).
//
// What Pulsar promises: GET_LAST_MESSAGE_ID names the last message a reader can read (what
// `Reader.hasMessageAvailable()` and a consumer's `getLastMessageId()` rely on).
//
// Per try: a scalable topic with one segment; COMMITS transactions of one message each. After the
// first commit a consumer of the segment asks GET_LAST_MESSAGE_ID; after the others a durable
// subscription receives every committed message, and then (after SETTLE_MS) the consumer asks
// again and a fresh Reader reads from the start while `hasMessageAvailable()`. The bug shows when
// the subscription got every message and the broker's last message id is behind the last of them
// (or the Reader stopped short of them; Java's Reader usually does not, as it counts the messages
// it has prefetched): 5.0.1's MetadataTransactionBuffer never refreshes PersistentTopic's cached
// last dispatchable position.
//
//   java -cp <pulsar-client-v5 jars>:. V5StaleLastMessageId --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--commits 3] [--listener external]

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.PulsarClientBuilder;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.config.TransactionPolicy;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5StaleLastMessageId implements Out.Program {
    private final Out out = new Out();
    private final Cli cli;
    private final Admin admin;
    private final String run = UUID.randomUUID().toString().substring(0, 6);
    private PulsarClient client;
    private org.apache.pulsar.client.api.PulsarClient v4;

    private V5StaleLastMessageId(Cli cli) {
        this.cli = cli;
        this.admin = new Admin(cli.required("--admin-url"));
    }

    public static void main(String[] argv) {
        Out.run(argv, V5StaleLastMessageId::new);
    }

    @Override
    public Out out() {
        return out;
    }

    @Override
    public void runAll() throws Exception {
        String service = cli.required("--service-url");
        String listener = cli.get("--listener", null);
        out.info("client", "Pulsar Java client " + PulsarClient.class.getPackage().getImplementationVersion());
        try {
            V5Clients clients = V5Clients.connect(service, listener);
            client = clients.client;
            v4 = clients.v4;
        } catch (Exception err) {
            out.error("set-up (clients)", err);
            return;
        }
        try {
            int tries = cli.integer("--tries", 1);
            for (int n = 1; n <= tries; n++) {
                attempt(n);
            }
        } finally {
            v4.close();
            client.shutdown();
        }
    }

    private void attempt(int n) throws Exception {
        int commits = cli.integer("--commits", 3);
        String local = "lmid-" + run + "-" + n;
        String topic = "topic://public/default/" + local;
        admin.put("/admin/v2/scalable/public/default/" + local + "?numInitialSegments=1", null);
        List<String> committed = new ArrayList<>();
        List<String> delivered = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic).create();
             QueueConsumer<String> subscription = client.newQueueConsumer(Schema.string()).topic(topic)
                     .subscriptionName("s").subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                     .subscribe()) {
            commitOne(producer, "m1", committed);
            String segment = segmentOf(local);
            out.info("try " + n + " segment", segment);
            try (org.apache.pulsar.client.api.Consumer<String> probe = segmentConsumer(segment)) {
                String first = String.valueOf(probe.getLastMessageId());
                for (int i = 2; i <= commits; i++) {
                    commitOne(producer, "m" + i, committed);
                }
                for (int i = 0; i < commits * 2; i++) {   // bounded: ends at the first quiet receive
                    Message<String> message = subscription.receive(Duration.ofSeconds(i < commits ? 15 : 3));
                    if (message == null) {
                        break;
                    }
                    delivered.add(message.value());
                    subscription.acknowledge(message.id());
                }
                Thread.sleep(cli.integer("--settle-ms", 3000));
                String last = String.valueOf(probe.getLastMessageId());
                List<String> read = new ArrayList<>();
                try (org.apache.pulsar.client.api.Reader<String> reader = segmentReader(segment)) {
                    while (read.size() < commits * 2 && reader.hasMessageAvailable()) {
                        org.apache.pulsar.client.api.Message<String> message = reader.readNext(5, TimeUnit.SECONDS);
                        if (message == null) {
                            break;
                        }
                        read.add(message.getValue() + "@" + message.getMessageId());
                    }
                }
                boolean allDelivered = delivered.containsAll(committed);
                long[] newest = {-1, -1};
                for (String entry : read) {
                    long[] at = position(entry.substring(entry.indexOf('@') + 1));
                    if (compare(at, newest) > 0) {
                        newest = at;
                    }
                }
                // the bug: the broker's last message id is behind a committed message it delivered
                // (or a Reader bounded by it stopped before the committed messages)
                boolean stale = compare(position(last), newest) < 0;
                boolean shows = allDelivered && (stale || read.size() < committed.size());
                String summary = "committed " + committed + "; the subscription delivered " + delivered
                        + "; GET_LAST_MESSAGE_ID after the first commit " + first + ", after all " + last
                        + "; a fresh Reader read " + read.size() + " while hasMessageAvailable(): " + read;
                if (!allDelivered) {
                    out.info("try " + n + " not judged", "the subscription did not deliver every committed message");
                }
                String example = "GET_LAST_MESSAGE_ID on " + segment + " answers " + last + " after "
                        + committed.size() + " commits the subscription delivered; "
                        + (read.size() < committed.size() ? "a Reader bounded by it read " + read.size() + " of them"
                        : "a Reader read the last of them at " + newest[0] + ":" + newest[1]);
                out.attempt(n, shows, summary, shows ? List.of(example) : List.of());
            }
        }
    }

    private void commitOne(Producer<String> producer, String value, List<String> committed) throws Exception {
        Transaction txn = client.newTransaction();
        producer.newMessage().transaction(txn).value(run + "/" + value).send();
        txn.commit();
        committed.add(run + "/" + value);
    }

    /** ledger and entry of a v4 message id's text (`ledger:entry:partition[:batch]`). */
    private static long[] position(String id) {
        String[] parts = id.split(":");
        try {
            return new long[] {Long.parseLong(parts[0]), Long.parseLong(parts[1])};
        } catch (RuntimeException err) {
            return new long[] {-1, -1};
        }
    }

    private static int compare(long[] a, long[] b) {
        return a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]);
    }

    // The v4 API refuses segment:// names ("Scalable topics (topic://) require the V5 client SDK");
    // the v5 client reads segments through these two public methods of the same PulsarClientImpl.

    /** A consumer of one segment (its GET_LAST_MESSAGE_ID is the segment's). */
    private org.apache.pulsar.client.api.Consumer<String> segmentConsumer(String segment) throws Exception {
        org.apache.pulsar.client.impl.conf.ConsumerConfigurationData<String> conf =
                new org.apache.pulsar.client.impl.conf.ConsumerConfigurationData<>();
        conf.getTopicNames().add(segment);
        conf.setSubscriptionName("probe");
        return ((org.apache.pulsar.client.impl.PulsarClientImpl) v4)
                .subscribeSegmentAsync(conf, org.apache.pulsar.client.api.Schema.STRING).get(30, TimeUnit.SECONDS);
    }

    /** A Reader of one segment from its first message. */
    private org.apache.pulsar.client.api.Reader<String> segmentReader(String segment) throws Exception {
        org.apache.pulsar.client.impl.conf.ReaderConfigurationData<String> conf =
                new org.apache.pulsar.client.impl.conf.ReaderConfigurationData<>();
        conf.setTopicName(segment);
        conf.setStartMessageId(org.apache.pulsar.client.api.MessageId.earliest);
        return ((org.apache.pulsar.client.impl.PulsarClientImpl) v4)
                .createSegmentReaderAsync(conf, org.apache.pulsar.client.api.Schema.STRING).get(30, TimeUnit.SECONDS);
    }

    /** The segment:// name of the topic's one segment: `<start>-<end>-<id>` from the admin API's
     *  layout when it spells it so, else the whole hash range's first segment, 0000-ffff-0. */
    private String segmentOf(String local) throws Exception {
        String layout = admin.get("/admin/v2/scalable/public/default/" + local);
        Matcher m = Pattern.compile("\\b([0-9a-f]{4}-[0-9a-f]{4}-\\d+)\\b").matcher(layout);
        return "segment://public/default/" + local + "/" + (m.find() ? m.group(1) : "0000-ffff-0");
    }
}
