// Reproduces docs/findings/v4-cumulative-ack-of-acked-batch-message.md on v5 (PIP-473) segments with
// Pulsar's own Java client (the v5 API of pulsar-client-v5: a stream consumer's transactional cumulative
// ack) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message is consumed in at most one committed transaction; a transactional ack
// of an already acknowledged message is refused (the v5 client learns of a refused ack at the commit,
// which it refuses).
//
// What it does, per try: three scalable topics of one segment, each with one stream consumer.
//   * `batch`: a batching producer publishes a batch of four messages; transaction 1 acks the second
//     cumulatively and commits; transaction 2 acks that same message cumulatively and commits;
//   * `passed-over`: the same, transaction 2 acks the batch's first message;
//   * `control`: two messages sent unbatched; transaction 1 acks the second cumulatively and commits,
//     transaction 2 acks it again.
// The v5 API's transactional ack gives no future, so each ack is followed by ACKS_SETTLE_MS before the
// commit. Transaction 2's commit should be refused in every case; the bug shows when it commits in
// `batch` or `passed-over`, while `control` is refused (which also shows the acks reach the broker).
// Where: a segment's subscription keeps 4.x's PendingAckHandleImpl (5.0.1's MetadataPendingAckStore is
// only its store), which compares a cumulative ack's entry with the cursor's mark-delete position only.
//
//   java -cp <pulsar-client-v5 jars>:. V5CumulativeAckOfAckedBatchMessage --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.MessageId;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.StreamConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.BatchingPolicy;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5CumulativeAckOfAckedBatchMessage extends Repro {
    private static final List<String> CASES = List.of("batch", "passed-over", "control");
    /** The v5 API's transactional ack returns before the broker has it and gives no future to wait on. */
    private static final long ACKS_SETTLE_MS = 1_000;

    private PulsarClient client;

    private V5CumulativeAckOfAckedBatchMessage(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5CumulativeAckOfAckedBatchMessage::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try three scalable topics of one segment with a stream consumer: "
                + "transaction 1 acks a message cumulatively and commits, transaction 2 acks an already "
                + "acknowledged one cumulatively (`batch`: the same message of a batch of four, `passed-over`: the "
                + "batch's first message, `control`: the same message, sent unbatched), whose commit should be "
                + "refused");
        client = V5Clients.of(this).client;
    }

    @Override
    void attempt(int n) throws Exception {
        boolean shows = false;
        List<String> parts = new ArrayList<>();
        List<String> examples = new ArrayList<>();
        try {
            for (String kind : CASES) {
                String local = "cb-" + run + "-" + n + "-" + kind;
                admin.createScalableTopic(local, 1);
                String outcome = contest(kind, "topic://public/default/" + local, n);
                shows |= !kind.equals("control") && outcome.startsWith("accepted");
                parts.add(kind + ": " + outcome);
                examples.add(kind + ": topic://public/default/" + local);
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        }
    }

    /** One case on its own topic: transaction 1's cumulative ack and commit, then transaction 2's. */
    private String contest(String kind, String topic, int n) throws Exception {
        try (StreamConsumer<String> consumer = client.newStreamConsumer(Schema.string()).topic(topic)
                .subscriptionName("s").subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                .subscribe()) {
            boolean batched = !kind.equals("control");
            int count = batched ? 4 : 2;
            publish(topic, n, count, batched);
            List<Message<String>> got = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                Message<String> message = consumer.receive(Duration.ofSeconds(30));
                if (message == null) {
                    return "set-up failed: received " + i + " of " + count + " in 30 s";
                }
                got.add(message);
            }
            MessageId acked = got.get(1).id();
            Transaction one = client.newTransaction();
            consumer.acknowledgeCumulative(acked, one);
            Thread.sleep(ACKS_SETTLE_MS);
            try {
                one.commit();
            } catch (Exception err) {
                return "not judged: transaction 1's commit failed (" + Out.trim(Out.describe(err)) + ")";
            }
            MessageId again = kind.equals("passed-over") ? got.get(0).id() : acked;
            Transaction two = client.newTransaction();
            consumer.acknowledgeCumulative(again, two);
            Thread.sleep(ACKS_SETTLE_MS);
            try {
                two.commit();
                return "accepted: transaction 2's cumulative ack of " + again + ", acknowledged by transaction 1's "
                        + "committed one, committed too: consumed twice";
            } catch (Exception err) {
                return "transaction 2's commit refused (" + Out.trim(Out.describe(err)) + ")";
            }
        }
    }

    /** `count` messages, as one batch (`batched`) or one at a time. */
    private void publish(String topic, int n, int count, boolean batched) throws Exception {
        BatchingPolicy batching = batched
                ? BatchingPolicy.builder().enabled(true).maxMessages(count).maxPublishDelay(Duration.ofSeconds(1)).build()
                : BatchingPolicy.ofDisabled();
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic).batchingPolicy(batching)
                .create()) {
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sends.add(producer.async().newMessage().value(run + "/" + n + "/" + i).send());
                if (!batched) {
                    sends.get(i).get(60, TimeUnit.SECONDS);
                }
            }
            for (CompletableFuture<MessageId> send : sends) {
                send.get(60, TimeUnit.SECONDS);
            }
        }
    }
}
