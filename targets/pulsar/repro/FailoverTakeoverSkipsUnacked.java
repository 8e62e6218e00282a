// Probes a lead from the release matrix of 2026-12-02 (chaos.yaml, 3.2.0, v4): a committed message was
// never delivered to a Failover subscription (`undelivered`) after the consumer that was active on its
// partition closed; the consumer that took over was sent later messages first and acknowledged one of them
// cumulatively before the broker's delayed rewind. Pulsar's own Java client (the v4 API) and the admin
// REST API only; no transaction. Written by txnbench (not fetched).
//
// What Pulsar promises: when the active consumer of a Failover subscription goes away, the next one is
// given every message the subscription has not acknowledged, from the first unacknowledged on; so an
// application that acknowledges cumulatively what it has processed never acknowledges a message nobody
// received. The broker delays the hand-over (activeConsumerFailoverDelayTimeMillis, 1 s by default) and
// then rewinds the cursor to the first unacknowledged message.
//
// What it does, per try: per round a topic with a backlog of unbatched messages "0".."N-1" and a Failover
// subscription with two consumers: A (priority level 0, the active one) and B (level 1). A receives and
// acknowledges cumulatively each message as it comes, and is closed 20-170 ms after its first message,
// mid-stream (its receiver queue holds messages it never processed, and the broker is sending it more).
// B then receives and acknowledges as the case says until nothing comes for 3 s (a round where A read the
// whole backlog first is void):
//   * `cumulative`: B acknowledges each message cumulatively as it comes (an application's Failover loop);
//   * `individual` (control): B acknowledges each one individually; a rewind gives it every message again.
// The bug shows when a message after A's last acknowledged one never reached B and B's cumulative ack
// covered it: B was given later messages before the rewind, and acknowledged past the ones A had been sent.
// Where (2.10.5-5.0.1 broker bytecode): PersistentDispatcherSingleActiveConsumer.dispatchEntriesToConsumer
// reads again for `getActiveConsumer()` once a send completes; after the hand-over that is the new active
// consumer, and readMoreEntries does not consult the pending delayed rewind (readOnActiveConsumerTask),
// which only consumerFlow and redeliverUnacknowledgedMessages honour: the new consumer is sent entries from
// the cursor's read position, past the ones the old consumer was sent, before the rewind.
//   java -cp <pulsar-client jars>:. FailoverTakeoverSkipsUnacked --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--rounds 8]

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

public final class FailoverTakeoverSkipsUnacked extends Repro {
    private static final List<String> CASES = List.of("cumulative", "individual");
    private static final int BACKLOG = 5_000;
    private static final int QUEUE = 50;

    private final int rounds;
    private final Random random = new Random();
    private PulsarClient client;
    private String namespace;

    private FailoverTakeoverSkipsUnacked(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
        this.rounds = cli.integer("--rounds", 8);
    }

    public static void main(String[] argv) {
        Out.run(argv, FailoverTakeoverSkipsUnacked::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of " + rounds + " rounds per case; per round a topic with " + BACKLOG
                + " messages and a Failover subscription: A (active) acks cumulatively as it receives and is closed "
                + "20-170 ms after its first message; B then acks each message it gets cumulatively (`cumulative`) or "
                + "individually (`individual`, the control); every message after A's last ack must reach B");
        client = setUp("client", () -> v4Client(false, 30, true));
        namespace = "public/fx-fo-" + run;
        setUp("namespace", () -> {
            admin.createNamespace(namespace, 1);
            return null;
        });
    }

    @Override
    void attempt(int n) throws Exception {
        try {
            boolean shows = false;
            List<String> parts = new ArrayList<>();
            List<String> examples = new ArrayList<>();
            for (String kind : CASES) {
                int lossy = 0;
                int voided = 0;
                String example = null;
                for (int r = 0; r < rounds; r++) {
                    String topic = "persistent://" + namespace + "/" + kind + "-" + n + "-" + r;
                    String lost = round(kind, topic);
                    if ("void".equals(lost)) {
                        voided++;
                    } else if (lost != null) {
                        lossy++;
                        if (example == null) {
                            example = topic + ": " + lost;
                        }
                    }
                }
                shows |= kind.equals("cumulative") && lossy > 0;
                parts.add(kind + ": " + lossy + " of " + (rounds - voided) + " hand-overs lost messages"
                        + (voided > 0 ? " (" + voided + " rounds void: A read the whole backlog)" : ""));
                if (example != null) {
                    examples.add(kind + ": " + example);
                }
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        }
    }

    /** What the round lost (messages after A's last ack that never reached B), "void" when A read the whole
     *  backlog before it closed (no hand-over mid-stream), or null. */
    private String round(String kind, String topic) throws Exception {
        publish(topic);
        Consumer<String> a = consumer(topic, "a", 0);
        Consumer<String> b = consumer(topic, "b", 1);
        try {
            AtomicInteger lastAcked = new AtomicInteger(-1);
            CountDownLatch started = new CountDownLatch(1);
            Thread reader = new Thread(() -> readUntilClosed(a, lastAcked, started), "consumer-a");
            reader.start();
            // the broker starts sending to A after its own hand-over delay (1 s); then A reads ~5,000/s here
            if (!started.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("A received nothing in 30 s");
            }
            Thread.sleep(20 + random.nextInt(150));   // A is mid-stream: the broker is sending it messages
            a.close();
            reader.join(TimeUnit.SECONDS.toMillis(30));
            if (lastAcked.get() >= BACKLOG - 1) {
                return "void";
            }
            TreeSet<Integer> seen = new TreeSet<>();
            int first = -1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline) {
                Message<String> message = b.receive(3, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                int value = Integer.parseInt(message.getValue());
                if (first < 0) {
                    first = value;
                }
                seen.add(value);
                if (kind.equals("cumulative")) {
                    b.acknowledgeCumulative(message);
                } else {
                    b.acknowledge(message);
                }
            }
            TreeSet<Integer> missing = new TreeSet<>();
            for (int i = lastAcked.get() + 1; i < BACKLOG; i++) {
                if (!seen.contains(i)) {
                    missing.add(i);
                }
            }
            if (missing.isEmpty()) {
                return null;
            }
            return "A acked up to " + lastAcked.get() + "; B's first message " + first + "; never reached B: "
                    + missing.size() + " (" + missing.first() + "-" + missing.last() + ")";
        } finally {
            b.close();
        }
    }

    /** A's loop: each message acknowledged cumulatively as it comes, until A is closed (an ack refused
     *  because A is closing was never sent, so `lastAcked` is what the broker was told). */
    private static void readUntilClosed(Consumer<String> a, AtomicInteger lastAcked, CountDownLatch started) {
        try {
            while (true) {
                Message<String> message = a.receive(5, TimeUnit.SECONDS);
                if (message == null) {
                    return;
                }
                a.acknowledgeCumulative(message);
                lastAcked.set(Integer.parseInt(message.getValue()));
                started.countDown();
            }
        } catch (Exception closed) {
            // A was closed under its loop: the hand-over this round is about
        }
    }

    private Consumer<String> consumer(String topic, String name, int priority) throws Exception {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName("s").consumerName(name)
                .subscriptionType(SubscriptionType.Failover).priorityLevel(priority)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS).receiverQueueSize(QUEUE).subscribe();
    }

    /** The backlog, unbatched: "0" .. BACKLOG-1, in order. */
    private void publish(String topic) throws Exception {
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .maxPendingMessages(BACKLOG).sendTimeout(60, TimeUnit.SECONDS).create()) {
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < BACKLOG; i++) {
                sends.add(producer.sendAsync(Integer.toString(i)));
            }
            for (CompletableFuture<MessageId> send : sends) {
                send.get(60, TimeUnit.SECONDS);
            }
        }
    }
}
