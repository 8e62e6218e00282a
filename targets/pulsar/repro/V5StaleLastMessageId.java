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
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5StaleLastMessageId extends Repro {
    private V5Clients clients;
    private PulsarClient client;

    private V5StaleLastMessageId(Cli cli) {
        super(cli, PulsarClient.class);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5StaleLastMessageId::new);
    }

    @Override
    void setUp() throws Exception {
        clients = V5Clients.of(this);
        client = clients.client;
    }

    @Override
    void attempt(int n) throws Exception {
        int commits = cli.integer("--commits", 3);
        String local = "lmid-" + run + "-" + n;
        String topic = "topic://public/default/" + local;
        admin.createScalableTopic(local, 1);
        List<String> committed = new ArrayList<>();
        List<String> delivered = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic).create();
             QueueConsumer<String> subscription = client.newQueueConsumer(Schema.string()).topic(topic)
                     .subscriptionName("s").subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                     .subscribe()) {
            clients.commitOne(producer, run + "/m1", committed);
            String segment = admin.firstSegment(local);
            out.info("try " + n + " segment", segment);
            try (org.apache.pulsar.client.api.Consumer<String> probe = clients.segmentConsumer(segment)) {
                String first = String.valueOf(probe.getLastMessageId());
                for (int i = 2; i <= commits; i++) {
                    clients.commitOne(producer, run + "/m" + i, committed);
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
                try (org.apache.pulsar.client.api.Reader<String> reader = clients.segmentReader(segment, 30)) {
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

    /** ledger and entry of a v4 message id's text (`ledger:entry:partition[:batch]`). */
    private static long[] position(String id) {
        String[] parts = id.split(":");
        try {
            return new long[] {Long.parseLong(parts[0]), Long.parseLong(parts[1])};
        } catch (RuntimeException err) {
            return new long[] {-1, -1};
        }
    }
}
