// Probes a lead from the release matrix of 2026-12-02 (chaos.yaml with a Failover pipeline acking
// cumulatively, 2.10.5, v4): after its topic was loaded again, messages of a batch that no committed
// transaction had acknowledged were never delivered (`undelivered`), and after an aborted transaction's
// cumulative ack the subscription went on past the batch it covered (`ctp-loss`). Pulsar's own Java
// client (the v4 API) and the admin REST API only. Written by txnbench (not fetched).
//
// What Pulsar promises: a cumulative transactional ack inside a batch acknowledges, when its transaction
// commits, the messages up to its index and no others (the rest of the batch is delivered); when its
// transaction aborts, nothing (every message it covered is delivered again).
//
// What it does, per try: per case a namespace of one bundle (an unload moves only its topic), a topic, a
// Failover subscription with one consumer (batch-index acknowledgement on), a batching producer
// publishing one batch of four. A transaction acks one message of the batch cumulatively, then:
//   * `committed-then-reload`: the transaction (index 0) commits, then the topic's namespace is unloaded
//     (the next load replays the subscription's pending-ack log); the consumer must get indexes 1-3;
//   * `commit-after-reload`: the namespace is unloaded while the transaction (index 0) is open, then it
//     commits; the consumer must get indexes 1-3;
//   * `abort-after-reload`: the same with index 1 and an abort; the consumer must get all four again;
//   * `commit` (control): index 0, commit, no unload; the consumer must get indexes 1-3.
// Each case reads what the consumer gets for 10 s after the end (and asks for everything again once, as
// an application that saw its transaction end would) and reports which of the batch's indexes came.
//   java -cp <pulsar-client jars>:. V4CumulativeBatchAckAcrossReload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
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

public final class V4CumulativeBatchAckAcrossReload extends Repro {
    private static final List<String> CASES =
            List.of("committed-then-reload", "commit-after-reload", "abort-after-reload", "commit");
    private static final int BATCH = 4;

    private PulsarClient client;

    private V4CumulativeBatchAckAcrossReload(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CumulativeBatchAckAcrossReload::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per case a topic with a Failover subscription and a batch of four; a "
                + "transaction acks one message cumulatively; the namespace is unloaded after it commits, or while "
                + "it is open and it then commits (index 0 acked: indexes 1-3 must come again) or aborts (index 1 "
                + "acked: all four must come again); `commit` without the unload is the control");
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    @Override
    void attempt(int n) {
        attemptCases(n, "fx-cr", CASES, List.of("commit"), "missing",
                (kind, namespace, topic) -> contest(kind, namespace, topic, n));
    }

    /** {"ok" | "missing" | "other", what happened}. */
    private String[] contest(String kind, String namespace, String topic, int n) throws Exception {
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("s")
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true).receiverQueueSize(10).subscribe()) {
            List<MessageId> ids = publish(topic, n);
            List<Message<String>> got = new ArrayList<>();
            for (int i = 0; i < BATCH; i++) {
                Message<String> message = consumer.receive(30, TimeUnit.SECONDS);
                if (message == null) {
                    return new String[] {"other", "set-up failed: received " + i + " of " + BATCH};
                }
                got.add(message);
            }
            boolean commits = kind.startsWith("commit");
            int index = commits ? 0 : 1;
            Transaction txn = newTxn(client, 2);
            consumer.acknowledgeCumulativeAsync(got.get(index).getMessageId(), txn).get(60, TimeUnit.SECONDS);
            String moved = "";
            if (kind.endsWith("after-reload")) {
                admin.unloadNamespace(namespace);
                moved = "unloaded while open; ";
                Thread.sleep(3_000);
            }
            if (commits) {
                txn.commit().get(60, TimeUnit.SECONDS);
            } else {
                txn.abort().get(60, TimeUnit.SECONDS);
            }
            if (kind.endsWith("then-reload")) {
                admin.unloadNamespace(namespace);
                moved = "unloaded after the commit; ";
                Thread.sleep(3_000);
            }
            TreeSet<Integer> again = new TreeSet<>();
            for (MessageId id : givenAgain(consumer, 10)) {
                again.add(got.indexOf(find(got, id)));
            }
            TreeSet<Integer> expected = new TreeSet<>();
            for (int i = commits ? index + 1 : 0; i < BATCH; i++) {
                expected.add(i);
            }
            String what = moved + (commits ? "committed" : "aborted") + " a cumulative ack of index " + index + " of "
                    + Repro.position(ids.get(0)) + "; indexes delivered again: " + again + ", expected " + expected;
            if (again.containsAll(expected)) {
                return new String[] {"ok", what};
            }
            return new String[] {"missing", what + ": MISSING " + missing(expected, again)};
        }
    }

    private static TreeSet<Integer> missing(TreeSet<Integer> expected, TreeSet<Integer> got) {
        TreeSet<Integer> out = new TreeSet<>(expected);
        out.removeAll(got);
        return out;
    }

    private static Message<String> find(List<Message<String>> got, MessageId id) {
        for (Message<String> one : got) {
            if (one.getMessageId().equals(id)) {
                return one;
            }
        }
        return null;
    }

    /** One batch of four; their ids in order. */
    private List<MessageId> publish(String topic, int n) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(true)
                .batchingMaxMessages(BATCH).batchingMaxPublishDelay(1, TimeUnit.SECONDS)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < BATCH; i++) {
                sends.add(producer.sendAsync(run + "/" + n + "/" + i));
            }
            producer.flush();
            for (CompletableFuture<MessageId> send : sends) {
                ids.add(send.get(60, TimeUnit.SECONDS));
            }
        }
        String first = Repro.position(ids.get(0));
        if (!ids.stream().allMatch(id -> Repro.position(id).equals(first))) {
            throw new IllegalStateException("the batch was not one entry: " + ids);
        }
        return ids;
    }
}
