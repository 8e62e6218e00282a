// Reproduces docs/findings/v4-fully-held-batch-acked-twice.md with Pulsar's own
// Java client (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message of a Shared subscription is consumed once. A transactional ack of
// a message that another open transaction has already acknowledged is refused
// (TransactionConflictException), batch index by batch index for batched messages
// (PendingAckHandleImpl's overlap check), so at most one of the two transactions can commit it.
//
// What it does, per try: a namespace of one bundle, a topic, a Shared subscription with two consumers
// (batch-index acknowledgement on, as the broker's acknowledgmentAtBatchIndexLevelEnabled). A
// batching producer publishes three batches of two messages. Whichever consumer received a batch holds
// it; the other consumer then acks the batch's first message in one more transaction, as a sibling
// that took the same work would (a Shared subscription's consumers may ack any message of it):
//   * `full`: transaction 1 acks both messages of the batch, one ack each;
//   * `split`: transaction 1 acks the first message, transaction 2 the second;
//   * `control`: transaction 1 acks the first message only.
// In each case the last ack should be refused: the first message is held by transaction 1's pending
// ack. The bug shows when it is accepted and every transaction commits: one message consumed by two
// committed transactions (`full`, `split`); `control` shows the check working when some index of the
// batch is still free.
// Where: PendingAckHandleImpl keeps one ack set per entry, the AND of every pending ack of it; once the
// pending acks cover every index of the batch it is all zero, and PositionAckSetUtil.isAckSetOverlap
// reads an all-zero set as an empty bit set (BitSetRecyclable.valueOf drops zero words, size() 0) that
// overlaps nothing.
//   java -cp <pulsar-client jars>:. V4FullyHeldBatchAckedTwice --service-url pulsar://...
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

public final class V4FullyHeldBatchAckedTwice extends Repro {
    private static final String SUBSCRIPTION = "s";
    private static final List<String> CASES = List.of("full", "split", "control");

    private PulsarClient client;

    private V4FullyHeldBatchAckedTwice(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4FullyHeldBatchAckedTwice::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a Shared subscription with two consumers and three batches of "
                + "two messages; the holder's transactions ack a batch (`full`: both messages in one transaction, "
                + "`split`: one each in two, `control`: the first only), then the other consumer acks its first "
                + "message in one more transaction, which should be refused");
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    /** A received message and the consumer that received it. */
    private record Got(Message<String> message, Consumer<String> by) {
    }

    @Override
    void attempt(int n) throws Exception {
        String namespace = "public/fx-fb-" + run + "-" + n;
        String topic = "persistent://" + namespace + "/t";
        List<Consumer<String>> consumers = new ArrayList<>();
        try {
            admin.createNamespace(namespace, 1);
            for (String name : List.of("a", "b")) {
                consumers.add(client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                        .consumerName(name).subscriptionType(SubscriptionType.Shared)
                        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                        .enableBatchIndexAcknowledgment(true).receiverQueueSize(10).subscribe());
            }
            List<MessageId> published = publish(topic, n, CASES.size());
            List<Got> got = receive(consumers, published.size());
            if (got.size() < published.size()) {
                out.error("try " + n + " set-up: received " + got.size() + " of " + published.size() + " in 60 s",
                        null);
                return;
            }
            boolean shows = false;
            List<String> parts = new ArrayList<>();
            List<String> examples = new ArrayList<>();
            for (int c = 0; c < CASES.size(); c++) {
                Got first = find(got, published.get(2 * c));
                Got second = find(got, published.get(2 * c + 1));
                String outcome = contest(CASES.get(c), first, second, siblingOf(consumers, first.by()));
                shows |= !CASES.get(c).equals("control") && outcome.startsWith("accepted");
                parts.add(CASES.get(c) + ": " + outcome);
                examples.add(CASES.get(c) + ": batch " + Repro.position(published.get(2 * c)) + " held by consumer "
                        + first.by().getConsumerName());
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        } finally {
            for (Consumer<String> consumer : consumers) {
                consumer.close();
            }
        }
    }

    /** `batches` batches of two messages each; their ids in order (each batch's index 0, then 1). */
    private List<MessageId> publish(String topic, int n, int batches) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(true)
                .batchingMaxMessages(2).batchingMaxPublishDelay(1, TimeUnit.SECONDS)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            for (int batch = 0; batch < batches; batch++) {
                List<CompletableFuture<MessageId>> sends = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    sends.add(producer.sendAsync(run + "/" + n + "/" + batch + "/" + i));
                }
                producer.flush();
                for (CompletableFuture<MessageId> send : sends) {
                    ids.add(send.get(60, TimeUnit.SECONDS));
                }
            }
        }
        for (int batch = 0; batch < batches; batch++) {
            if (!Repro.position(ids.get(2 * batch)).equals(Repro.position(ids.get(2 * batch + 1)))) {
                throw new IllegalStateException("batch " + (batch + 1) + " was not one entry: " + ids);
            }
        }
        return ids;
    }

    /** Everything published, from whichever consumer the broker gave it to. */
    private static List<Got> receive(List<Consumer<String>> consumers, int count) throws Exception {
        List<Got> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (got.size() < count && System.nanoTime() < deadline) {
            for (Consumer<String> consumer : consumers) {
                Message<String> message = consumer.receive(200, TimeUnit.MILLISECONDS);
                if (message != null) {
                    got.add(new Got(message, consumer));
                }
            }
        }
        return got;
    }

    private static Got find(List<Got> got, MessageId id) {
        for (Got one : got) {
            if (one.message().getMessageId().equals(id)) {
                return one;
            }
        }
        throw new IllegalStateException("message " + id + " was not received");
    }

    /** One case on one batch (`first`, `second`): the holding transactions' acks, then the other consumer's
     *  ack of `first` in one more transaction; every transaction whose acks were taken commits. */
    private String contest(String kind, Got first, Got second, Consumer<String> other) throws Exception {
        Consumer<String> holder = first.by();
        List<Transaction> holding = new ArrayList<>();
        Transaction one = newTxn(client, 2);
        holding.add(one);
        holder.acknowledgeAsync(first.message().getMessageId(), one).get(60, TimeUnit.SECONDS);
        if (kind.equals("full")) {
            holder.acknowledgeAsync(second.message().getMessageId(), one).get(60, TimeUnit.SECONDS);
        } else if (kind.equals("split")) {
            Transaction two = newTxn(client, 2);
            holding.add(two);
            holder.acknowledgeAsync(second.message().getMessageId(), two).get(60, TimeUnit.SECONDS);
        }
        Transaction last = newTxn(client, 2);
        String ack;
        try {
            other.acknowledgeAsync(first.message().getMessageId(), last).get(60, TimeUnit.SECONDS);
            ack = "OK";
        } catch (Exception err) {
            ack = "refused (" + Out.trim(Out.describe(err)) + ")";
        }
        for (Transaction txn : holding) {
            txn.commit().get(60, TimeUnit.SECONDS);
        }
        if (!ack.equals("OK")) {
            last.abort().get(60, TimeUnit.SECONDS);
            return "the other consumer's ack " + ack + "; the holding transactions committed";
        }
        try {
            last.commit().get(60, TimeUnit.SECONDS);
            return "accepted: the other consumer's ack OK and every transaction committed, "
                    + Repro.position(first.message().getMessageId()) + " index 0 consumed twice";
        } catch (Exception err) {
            return "the other consumer's ack OK but its commit failed (" + Out.trim(Out.describe(err)) + ")";
        }
    }

    private static Consumer<String> siblingOf(List<Consumer<String>> consumers, Consumer<String> holder) {
        return consumers.get(0) == holder ? consumers.get(1) : consumers.get(0);
    }
}
