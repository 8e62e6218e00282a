// Reproduces docs/findings/v4-fully-held-batch-acked-twice.md on v5 (PIP-473) segments with Pulsar's
// own Java client (the v5 API of pulsar-client-v5) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message of a Shared (queue) subscription is consumed once; a transactional
// ack of a message another open transaction has acknowledged is refused, so at most one of the two
// transactions commits it (the v5 client learns of a refused ack at the commit, which it refuses).
//
// What it does, per try: a scalable topic of one segment, a queue subscription with two consumers, a
// batching producer publishing three batches of two messages. Whichever consumer received a batch
// holds it; the other consumer then acks the batch's first message in one more transaction:
//   * `full`: transaction 1 acks both messages of the batch;
//   * `split`: transaction 1 acks the first message, transaction 2 the second;
//   * `control`: transaction 1 acks the first message only.
// The v5 API's transactional ack gives no future, so each case waits ACKS_SETTLE_MS after the acks,
// commits the holding transactions, then commits the last one. The bug shows when the last commit
// succeeds in `full` or `split` (one message consumed by two committed transactions); in `control`
// it must be refused. Where: a segment's subscription keeps 4.x's PendingAckHandleImpl (5.0.1's
// MetadataPendingAckStore is only its store), whose overlap check reads an all-zero pending ack set
// (every index held) as an empty bit set.
//
//   java -cp <pulsar-client-v5 jars>:. V5FullyHeldBatchAckedTwice --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.MessageId;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.BatchingPolicy;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5FullyHeldBatchAckedTwice extends Repro {
    private static final List<String> CASES = List.of("full", "split", "control");
    /** The v5 API's transactional ack returns before the broker has it and gives no future to wait on. */
    private static final long ACKS_SETTLE_MS = 1_000;

    private PulsarClient client;

    private V5FullyHeldBatchAckedTwice(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5FullyHeldBatchAckedTwice::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a scalable topic of one segment, a queue subscription with two "
                + "consumers and three batches of two messages; the holder's transactions ack a batch (`full`: both "
                + "messages in one transaction, `split`: one each in two, `control`: the first only), then the other "
                + "consumer acks its first message in one more transaction, whose commit should be refused");
        client = V5Clients.of(this).client;
    }

    /** A received message and the consumer that received it. */
    private record Got(Message<String> message, QueueConsumer<String> by) {
    }

    @Override
    void attempt(int n) throws Exception {
        String local = "fb-" + run + "-" + n;
        String topic = "topic://public/default/" + local;
        List<QueueConsumer<String>> consumers = new ArrayList<>();
        try {
            admin.createScalableTopic(local, 1);
            for (String name : List.of("a", "b")) {
                consumers.add(client.newQueueConsumer(Schema.string()).topic(topic).subscriptionName("s")
                        .consumerName(name).subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                        .subscribe());
            }
            List<String> values = publish(topic, n);
            Map<String, Got> got = receive(consumers, values.size());
            if (got.size() < values.size()) {
                out.error("try " + n + " set-up: received " + got.size() + " of " + values.size() + " in 60 s", null);
                return;
            }
            boolean shows = false;
            List<String> parts = new ArrayList<>();
            List<String> examples = new ArrayList<>();
            for (int c = 0; c < CASES.size(); c++) {
                Got first = got.get(values.get(2 * c));
                Got second = got.get(values.get(2 * c + 1));
                QueueConsumer<String> other = consumers.get(0) == first.by() ? consumers.get(1) : consumers.get(0);
                String outcome = contest(CASES.get(c), first, second, other);
                shows |= !CASES.get(c).equals("control") && outcome.startsWith("accepted");
                parts.add(CASES.get(c) + ": " + outcome);
                examples.add(CASES.get(c) + ": batch " + first.message().id() + " and " + second.message().id()
                        + " held by consumer " + first.by().consumerName());
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        } finally {
            for (QueueConsumer<String> consumer : consumers) {
                consumer.close();
            }
        }
    }

    /** Three batches of two messages (a batch closes at two); their values in order. */
    private List<String> publish(String topic, int n) throws Exception {
        List<String> values = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic)
                .batchingPolicy(BatchingPolicy.builder().enabled(true).maxMessages(2)
                        .maxPublishDelay(Duration.ofSeconds(1)).build())
                .create()) {
            for (int batch = 0; batch < CASES.size(); batch++) {
                List<CompletableFuture<MessageId>> sends = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    String value = run + "/" + n + "/" + batch + "/" + i;
                    values.add(value);
                    sends.add(producer.async().newMessage().value(value).send());
                }
                for (CompletableFuture<MessageId> send : sends) {
                    send.get(60, TimeUnit.SECONDS);
                }
            }
        }
        return values;
    }

    /** Everything published, by value, from whichever consumer the broker gave it to. */
    private static Map<String, Got> receive(List<QueueConsumer<String>> consumers, int count) throws Exception {
        Map<String, Got> got = new LinkedHashMap<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (got.size() < count && System.nanoTime() < deadline) {
            for (QueueConsumer<String> consumer : consumers) {
                Message<String> message = consumer.receive(Duration.ofMillis(200));
                if (message != null) {
                    got.put(message.value(), new Got(message, consumer));
                }
            }
        }
        return got;
    }

    /** One case on one batch (`first`, `second`): the holding transactions' acks, then the other consumer's
     *  ack of `first` in one more transaction; the holding transactions commit, then the last one. */
    private String contest(String kind, Got first, Got second, QueueConsumer<String> other) throws Exception {
        QueueConsumer<String> holder = first.by();
        List<Transaction> holding = new ArrayList<>();
        Transaction one = client.newTransaction();
        holding.add(one);
        holder.acknowledge(first.message().id(), one);
        if (kind.equals("full")) {
            holder.acknowledge(second.message().id(), one);
        } else if (kind.equals("split")) {
            Transaction two = client.newTransaction();
            holding.add(two);
            holder.acknowledge(second.message().id(), two);
        }
        Thread.sleep(ACKS_SETTLE_MS);
        Transaction last = client.newTransaction();
        other.acknowledge(first.message().id(), last);
        Thread.sleep(ACKS_SETTLE_MS);
        for (Transaction txn : holding) {
            try {
                txn.commit();
            } catch (Exception err) {
                return "not judged: a holding transaction's commit failed (" + Out.trim(Out.describe(err)) + ")";
            }
        }
        try {
            last.commit();
            return "accepted: the other consumer's transaction committed too, " + first.message().id()
                    + " consumed twice";
        } catch (Exception err) {
            return "the other consumer's commit refused (" + Out.trim(Out.describe(err)) + ")";
        }
    }
}
