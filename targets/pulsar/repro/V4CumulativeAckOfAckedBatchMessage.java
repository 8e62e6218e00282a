// Reproduces docs/findings/v4-cumulative-ack-of-acked-batch-message.md with Pulsar's own Java client
// (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message is consumed in at most one committed transaction. A transactional ack
// of a message that is already acknowledged is refused (TransactionConflictException): an individual
// ack of an acknowledged entry or batch index, and a cumulative ack at or before the cursor's
// mark-delete position ("within range of cursor's markDeletePosition"). So an application that is
// given a message again (a redelivery, a failover, a restart from its queue) and processes it again
// cannot commit that second processing: its ack is refused and its outputs are aborted.
//
// What it does, per try: a namespace of one bundle, three topics, each with a Failover subscription and
// one consumer (batch-index acknowledgement on, as the broker's acknowledgmentAtBatchIndexLevelEnabled).
//   * `batch`: a batching producer publishes a batch of four messages (one entry); transaction 1 acks
//     its second message cumulatively and commits (the cursor keeps indexes 0 and 1 of the entry as
//     deleted, its mark-delete position the entry before); transaction 2 then acks that same second
//     message cumulatively again and commits;
//   * `passed-over`: the same, but transaction 2 acks the batch's first message, which transaction 1's
//     cumulative ack covered;
//   * `control`: two messages sent one at a time (two entries): transaction 1 acks the second
//     cumulatively and commits; transaction 2 acks it again.
// Transaction 2's ack should be refused in every case. The bug shows when it is accepted and both
// transactions commit (`batch`, `passed-over`): one message consumed by two committed transactions;
// `control` shows the check working on a whole entry.
// Where: PendingAckHandleImpl.internalCumulativeAcknowledgeMessage refuses a cumulative ack only when
// `position.compareTo(cursor.getMarkDeletedPosition()) <= 0`; a batch message's position is its entry, and
// after a cumulative ack inside a batch the mark-delete position is the entry before it (the acked
// indexes are kept as the entry's deleted batch indexes), which that comparison never consults.
//   java -cp <pulsar-client jars>:. V4CumulativeAckOfAckedBatchMessage --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4CumulativeAckOfAckedBatchMessage extends Repro {
    private static final String SUBSCRIPTION = "s";
    private static final List<String> CASES = List.of("batch", "passed-over", "control");

    private PulsarClient client;

    private V4CumulativeAckOfAckedBatchMessage(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CumulativeAckOfAckedBatchMessage::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try three topics with a Failover subscription: transaction 1 acks a "
                + "message cumulatively and commits, transaction 2 acks an already acknowledged one cumulatively "
                + "(`batch`: the same message of a batch of four, `passed-over`: the batch's first message, "
                + "`control`: the same message, sent unbatched), which should be refused");
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    @Override
    void attempt(int n) throws Exception {
        String namespace = "public/fx-cb-" + run + "-" + n;
        boolean shows = false;
        List<String> parts = new ArrayList<>();
        List<String> examples = new ArrayList<>();
        try {
            admin.createNamespace(namespace, 1);
            for (String kind : CASES) {
                String topic = "persistent://" + namespace + "/" + kind;
                String outcome = contest(kind, topic, n);
                shows |= !kind.equals("control") && outcome.startsWith("accepted");
                parts.add(kind + ": " + outcome);
                examples.add(kind + ": " + topic);
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        }
    }

    /** One case on its own topic: transaction 1's cumulative ack and commit, then transaction 2's ack. */
    private String contest(String kind, String topic, int n) throws Exception {
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic)
                .subscriptionName(SUBSCRIPTION).subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true).receiverQueueSize(10).subscribe()) {
            boolean batched = !kind.equals("control");
            List<MessageId> ids = publish(topic, n, batched ? 4 : 2, batched);
            List<Message<String>> got = new ArrayList<>();
            for (int i = 0; i < ids.size(); i++) {
                Message<String> message = consumer.receive(30, TimeUnit.SECONDS);
                if (message == null) {
                    return "set-up failed: received " + i + " of " + ids.size() + " in 30 s";
                }
                got.add(message);
            }
            MessageId acked = got.get(1).getMessageId();
            Transaction one = newTxn(client, 2);
            consumer.acknowledgeCumulativeAsync(acked, one).get(60, TimeUnit.SECONDS);
            one.commit().get(60, TimeUnit.SECONDS);
            MessageId again = kind.equals("passed-over") ? got.get(0).getMessageId() : acked;
            Transaction two = newTxn(client, 2);
            try {
                consumer.acknowledgeCumulativeAsync(again, two).get(60, TimeUnit.SECONDS);
            } catch (Exception err) {
                two.abort().get(60, TimeUnit.SECONDS);
                return "transaction 2's ack of " + Repro.position(again) + " refused ("
                        + Out.trim(Out.describe(err)) + ")";
            }
            try {
                two.commit().get(60, TimeUnit.SECONDS);
                return "accepted: transaction 2's cumulative ack of " + Repro.position(again)
                        + ", acknowledged by transaction 1's committed one, OK and committed: consumed twice";
            } catch (Exception err) {
                return "transaction 2's ack OK but its commit failed (" + Out.trim(Out.describe(err)) + ")";
            }
        }
    }

    /** `count` messages, as one batch (`batched`) or one entry each; their ids in order. */
    private List<MessageId> publish(String topic, int n, int count, boolean batched) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(batched)
                .batchingMaxMessages(count).batchingMaxPublishDelay(1, TimeUnit.SECONDS)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sends.add(producer.sendAsync(run + "/" + n + "/" + i));
                if (!batched) {
                    sends.get(i).get(60, TimeUnit.SECONDS);
                }
            }
            producer.flush();
            for (CompletableFuture<MessageId> send : sends) {
                ids.add(send.get(60, TimeUnit.SECONDS));
            }
        }
        String first = Repro.position(ids.get(0));
        boolean oneEntry = ids.stream().allMatch(id -> Repro.position(id).equals(first));
        if (batched != oneEntry) {
            throw new IllegalStateException((batched ? "the batch was not one entry: " : "not one entry each: ")
                    + ids);
        }
        return ids;
    }
}
