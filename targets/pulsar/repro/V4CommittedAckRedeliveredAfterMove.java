// Reproduces docs/findings/v4-committed-ack-redelivered-after-move.md with Pulsar's own Java
// client (the v4 API, a persistent:// topic) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message acknowledged in a transaction whose commit returned OK is never
// delivered to that subscription again.
//
// What it does, per try: a namespace of one bundle with one topic (so an unload moves only it), a
// Shared subscription with CONSUMERS consumers on one client (each records every delivery). ROUNDS
// rounds, each:
//  * TXNS * PER messages are published and received; message i is acknowledged (by the consumer
//    it came to) in transaction i % TXNS, and every acknowledgement is confirmed by the broker;
//  * the topic moves: `pulsar-admin namespaces unload` of its namespace, or (`--fault restart`) a
//    graceful restart of its owner broker (asked of whoever runs this, see Out.ask);
//  * the transactions are committed one after another, SPACING_MS apart from the move's start
//    (each commit retried up to 3 times), so that some commits reach the topic's new owner while
//    the subscription's pending acks are replayed there, when the consumers reattach;
//  * deliveries are recorded for OBSERVE_MS more.
// With `--ballast B` the namespace holds B more topics whose subscriptions have a pending-ack store
// (and stay subscribed), so each move replays B+1 pending-ack logs at once, as a broker restart does.
// The bug shows when a message acknowledged in a transaction whose commit returned OK is
// delivered again after that commit was invoked, while the subscription's cursor (internal stats)
// holds it as acknowledged. (A redelivery the cursor does not hold as acknowledged is a commit
// that never reached the subscription: counted apart, see v4-commit-marker-skipped-on-bundle-unload.)
// The suspected cause: the new owner runs the commits queued during the pending-ack replay
// (PendingAckHandleImpl.handleCacheRequest) in the task that attaches the consumers; the
// dispatcher's first read returns the entries while they are still pending-acked
// (ManagedCursorImpl.filterReadEntries drops only deleted positions), the commit then clears
// them from the pending acks, and AbstractBaseDispatcher.filterEntriesForConsumer lets them
// through, with no check of the cursor before Consumer.sendMessages.
//
//   java -cp <pulsar-client jars>:. V4CommittedAckRedeliveredAfterMove --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 5] [--rounds 8] [--fault unload|restart] [--ballast 0]

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.impl.MessageIdImpl;

public final class V4CommittedAckRedeliveredAfterMove extends Repro {
    private static final String SUBSCRIPTION = "s";

    private final int consumers;
    private final int txns;
    private final int per;
    private final int rounds;
    private final long spacingMs;
    private final long observeMs;
    private final String fault;
    private final int ballast;
    private PulsarClient client;
    private ScheduledExecutorService timer;

    /** One delivery to a consumer: what, which entry, to whom, when (ms since the try began). */
    private record Delivery(String value, MessageId id, int consumer, long ms) {
    }

    /** One transaction of a round: the values it acknowledged and how its commit went. */
    private static final class Txn {
        final int j;
        final Transaction txn;
        final List<String> values = new ArrayList<>();
        volatile String ack = "ok";
        volatile String commit = "not invoked";
        volatile long commitStartMs = -1;
        volatile long commitEndMs = -1;
        volatile int attempts;

        Txn(int j, Transaction txn) {
            this.j = j;
            this.txn = txn;
        }

        boolean committed() {
            return commit.equals("ok");
        }
    }

    private V4CommittedAckRedeliveredAfterMove(Cli cli) {
        super(cli, PulsarClient.class, 8, 5);
        this.consumers = cli.integer("--consumers", 3);
        this.txns = cli.integer("--txns", 6);
        this.per = cli.integer("--per-txn", 4);
        this.rounds = cli.integer("--rounds", 8);
        this.spacingMs = cli.integer("--spacing-ms", 200);
        this.observeMs = cli.integer("--observe-ms", 3000);
        this.fault = cli.get("--fault", "unload");
        this.ballast = cli.integer("--ballast", 0);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CommittedAckRedeliveredAfterMove::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of " + rounds + " rounds; per round " + txns * per + " messages on a Shared "
                + "subscription with " + consumers + " consumers, acked in " + txns + " transactions, then "
                + ("restart".equals(fault) ? "a graceful restart of the topic's owner broker"
                : "an unload of the topic's namespace") + " and the commits " + spacingMs + " ms apart from its "
                + "start; deliveries watched for " + observeMs + " ms more");
        client = setUp("client", () -> v4Client(true, 30, true));
        timer = Executors.newScheduledThreadPool(txns + 1);
        atEnd(timer::shutdownNow);
    }

    @Override
    void attempt(int n) throws Exception {
        String namespace = "public/fx-ack-" + run + "-" + n;
        String local = "in";
        String topic = "persistent://" + namespace + "/" + local;
        try {
            admin.createNamespace(namespace, 1);
        } catch (Exception err) {
            out.error("try " + n + " set-up (namespace " + namespace + ")", err);
            return;
        }
        long t0 = System.nanoTime();
        ConcurrentLinkedQueue<Delivery> deliveries = new ConcurrentLinkedQueue<>();
        Map<String, Delivery> latest = new ConcurrentHashMap<>();
        List<Consumer<String>> subscribed = new ArrayList<>();
        Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(60, TimeUnit.SECONDS).create();
        for (int c = 0; c < consumers; c++) {
            final int index = c;
            subscribed.add(client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                    .subscriptionType(SubscriptionType.Shared)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .consumerName("c" + c)
                    .messageListener((consumer, message) -> {
                        Delivery d = new Delivery(message.getValue(), message.getMessageId(), index, Out.ms(t0));
                        deliveries.add(d);
                        latest.put(d.value, d);
                    }).subscribe());
        }
        List<AutoCloseable> ballastClients = new ArrayList<>();
        try {
            addBallast(namespace, ballastClients);
        } catch (Exception err) {
            out.error("try " + n + " set-up (ballast topics)", err);
            closeAll(subscribed, producer, ballastClients);
            return;
        }
        int bugRounds = 0;
        int bugValues = 0;
        int undone = 0;
        int whileOpen = 0;
        int committedTxns = 0;
        int judgedRounds = 0;
        Map<String, Integer> commitOutcomes = new TreeMap<>();
        List<String> examples = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        try {
            for (int r = 1; r <= rounds; r++) {
                Round round = round(n, r, namespace, local, producer, subscribed, deliveries, latest, t0);
                if (round == null) {
                    notes.add("round " + r + " not judged");
                    continue;
                }
                judgedRounds++;
                for (Txn t : round.txns) {
                    String key = t.commit.length() > 100 ? t.commit.substring(0, 100) : t.commit;
                    commitOutcomes.merge(key, 1, Integer::sum);
                    committedTxns += t.committed() ? 1 : 0;
                }
                bugValues += round.redelivered.size();
                bugRounds += round.redelivered.isEmpty() ? 0 : 1;
                undone += round.undone.size();
                whileOpen += round.whileOpen.size();
                for (String example : round.examples) {
                    if (examples.size() < 6) {
                        examples.add(example);
                    }
                }
            }
        } finally {
            closeAll(subscribed, producer, ballastClients);
        }
        if (judgedRounds == 0) {
            out.attempt(n, false, "no round could be judged: " + notes, examples);
            return;
        }
        String summary = judgedRounds + " of " + rounds + " rounds judged; commits " + commitOutcomes + " ("
                + committedTxns + " OK); " + bugValues + " messages acked in a committed transaction delivered "
                + "again after the commit was invoked, the cursor holding them acknowledged (" + bugRounds
                + " rounds); " + undone + " redelivered with the cursor not holding them acknowledged (a commit "
                + "that did not reach the subscription); " + whileOpen + " redelivered while their transaction "
                + "was open" + (notes.isEmpty() ? "" : "; " + notes);
        out.attempt(n, bugValues > 0, summary, examples);
    }

    /** BALLAST more topics in the namespace, each with a Shared subscription whose pending-ack store
     *  exists (one message acked in a committed transaction) and a consumer and producer that stay:
     *  each move reloads them and replays their pending acks beside the topic's, which lengthens
     *  the replay that the topic's commits and consumers wait for. */
    private void addBallast(String namespace, List<AutoCloseable> keep) throws Exception {
        for (int b = 0; b < ballast; b++) {
            String topic = "persistent://" + namespace + "/ballast-" + b;
            Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                    .subscriptionType(SubscriptionType.Shared)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            keep.add(consumer);
            Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false).create();
            keep.add(producer);
            producer.send("ballast");
            Message<String> message = consumer.receive(30, TimeUnit.SECONDS);
            if (message == null) {
                throw new IllegalStateException(topic + ": its message was not delivered in 30 s");
            }
            Transaction txn = newTxn(client, 1);
            consumer.acknowledgeAsync(message.getMessageId(), txn).get(60, TimeUnit.SECONDS);
            txn.commit().get(60, TimeUnit.SECONDS);
        }
        if (ballast > 0) {
            out.info("ballast", ballast + " topics in " + namespace + ", each with a subscription whose pending acks "
                    + "are replayed on every move");
        }
    }

    private static void closeAll(List<Consumer<String>> subscribed, Producer<String> producer,
                                 List<AutoCloseable> more) {
        for (Consumer<String> consumer : subscribed) {
            consumer.closeAsync();
        }
        producer.closeAsync();
        for (AutoCloseable c : more) {
            try {
                c.close();
            } catch (Exception err) {
                // closing at the end of a try: nothing to report
            }
        }
    }

    /** What one round saw. */
    private record Round(List<Txn> txns, List<String> redelivered, List<String> undone, List<String> whileOpen,
                         List<String> examples) {
    }

    private Round round(int n, int r, String namespace, String local, Producer<String> producer,
                        List<Consumer<String>> subscribed, ConcurrentLinkedQueue<Delivery> deliveries,
                        Map<String, Delivery> latest, long t0) throws Exception {
        String tag = "try " + n + " round " + r;
        int count = txns * per;
        List<String> values = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String value = run + "/" + n + "/" + r + "/" + i;
            producer.send(value);
            values.add(value);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline && !values.stream().allMatch(latest::containsKey)) {
            Thread.sleep(20);
        }
        if (!values.stream().allMatch(latest::containsKey)) {
            out.info(tag, "received " + values.stream().filter(latest::containsKey).count() + " of " + count
                    + " messages in 30 s; round skipped");
            return null;
        }
        Map<String, Delivery> first = new HashMap<>();
        for (String value : values) {
            first.put(value, latest.get(value));
        }

        // the acknowledgements, each in its transaction, each confirmed by the broker
        long ackStartMs = Out.ms(t0);
        List<Txn> open = new ArrayList<>();
        for (int j = 0; j < txns; j++) {
            open.add(new Txn(j, newTxn(client, 2)));
        }
        Map<Txn, List<CompletableFuture<Void>>> acks = new LinkedHashMap<>();
        for (int i = 0; i < count; i++) {
            Txn t = open.get(i % txns);
            Delivery d = first.get(values.get(i));
            t.values.add(d.value);
            acks.computeIfAbsent(t, k -> new ArrayList<>())
                    .add(subscribed.get(d.consumer).acknowledgeAsync(d.id, t.txn));
        }
        for (Map.Entry<Txn, List<CompletableFuture<Void>>> e : acks.entrySet()) {
            try {
                CompletableFuture.allOf(e.getValue().toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
            } catch (Exception err) {
                e.getKey().ack = Out.describe(err);
            }
        }
        long ackedMs = Out.ms(t0);
        String ownerBefore = admin.ownerOrWhy(namespace, local);

        // the move, and the commits spread over it
        long moveStart = Out.ms(t0);
        CompletableFuture<String> move = CompletableFuture.supplyAsync(() -> admin.move(out, fault, namespace, ownerBefore));
        List<CompletableFuture<Void>> commits = new ArrayList<>();
        for (Txn t : open) {
            CompletableFuture<Void> done = new CompletableFuture<>();
            commits.add(done);
            timer.schedule(() -> {
                try {
                    commit(t, t0);
                } finally {
                    done.complete(null);
                }
            }, t.j * spacingMs, TimeUnit.MILLISECONDS);
        }
        String moved = move.get(300, TimeUnit.SECONDS);
        long moveEnd = Out.ms(t0);
        CompletableFuture.allOf(commits.toArray(new CompletableFuture[0])).get(400, TimeUnit.SECONDS);
        Thread.sleep(observeMs);
        String ownerAfter = admin.ownerOrWhy(namespace, local);

        // what came back
        Map<String, Txn> txnOf = new HashMap<>();
        for (Txn t : open) {
            for (String value : t.values) {
                txnOf.put(value, t);
            }
        }
        List<Delivery> again = new ArrayList<>();
        for (Delivery d : deliveries) {
            Txn t = txnOf.get(d.value);
            if (t != null && d != first.get(d.value) && d.ms >= ackStartMs) {
                again.add(d);
            }
        }
        List<String> redelivered = new ArrayList<>();
        List<String> undone = new ArrayList<>();
        List<String> whileOpen = new ArrayList<>();
        List<String> examples = new ArrayList<>();
        String stats = again.isEmpty() ? "" : admin.internalStats(namespace, local);
        for (Delivery d : again) {
            Txn t = txnOf.get(d.value);
            if (!t.committed()) {
                continue;
            }
            boolean acknowledged = acknowledgedInCursor(stats, d.id);
            String phase = d.ms < t.commitStartMs ? "while the transaction was open"
                    : d.ms < t.commitEndMs ? "while its commit ran" : "after its commit returned OK";
            if (d.ms < t.commitStartMs) {
                whileOpen.add(d.value);
            } else if (acknowledged) {
                redelivered.add(d.value);
            } else {
                undone.add(d.value);
            }
            examples.add(tag + ": " + position(d.id) + " (" + d.value + ") acked in transaction "
                    + t.txn.getTxnID() + " (confirmed by " + ackedMs + " ms), delivered again to c" + d.consumer
                    + " at " + d.ms + " ms, " + phase + " (commit invoked " + t.commitStartMs + " ms, OK at "
                    + t.commitEndMs + " ms after " + t.attempts + " attempt(s)); move " + moved + " " + moveStart
                    + "-" + moveEnd + " ms, owner " + ownerBefore + " -> " + ownerAfter + "; cursor "
                    + (acknowledged ? "holds it acknowledged" : "does NOT hold it acknowledged") + ": "
                    + Out.trim(cursorSummary(stats)));
        }
        // anything of a transaction that did not commit, delivered again: acknowledged plainly
        for (Txn t : open) {
            if (!t.committed()) {
                for (String value : t.values) {
                    Delivery d = latest.get(value);
                    if (d != null && d != first.get(value)) {
                        subscribed.get(d.consumer).acknowledgeAsync(d.id);
                    }
                }
            }
        }
        out.info(tag, "move " + moved + " " + moveStart + "-" + moveEnd + " ms (" + ownerBefore + " -> " + ownerAfter
                + "); commits " + commitTimes(open) + "; " + again.size() + " deliveries again of acked messages");
        return new Round(open, redelivered, undone, whileOpen, examples);
    }

    private void commit(Txn t, long t0) {
        if (!t.ack.equals("ok")) {
            t.commit = "not invoked (ack failed: " + t.ack + ")";
            t.txn.abort();
            return;
        }
        t.commitStartMs = Out.ms(t0);
        String result = "";
        for (int attempt = 1; attempt <= 3; attempt++) {
            t.attempts = attempt;
            try {
                t.txn.commit().get(90, TimeUnit.SECONDS);
                result = "ok";
                break;
            } catch (Exception err) {
                Throwable cause = err.getCause() == null ? err : err.getCause();
                result = cause.getClass().getSimpleName() + ": " + cause.getMessage();
                Out.sleep(500);
            }
        }
        t.commit = result;
        t.commitEndMs = Out.ms(t0);
    }

    private static String commitTimes(List<Txn> open) {
        List<String> parts = new ArrayList<>();
        for (Txn t : open) {
            parts.add(t.commitStartMs + "-" + t.commitEndMs + (t.committed() ? "" : " " + Out.trim(t.commit)));
        }
        return String.join(", ", parts);
    }

    private static String cursorSummary(String stats) {
        if (stats.isEmpty()) {
            return "internal stats unavailable";
        }
        return "markDeletePosition " + Admin.field(stats, "markDeletePosition") + ", individuallyDeletedMessages "
                + Admin.field(stats, "individuallyDeletedMessages") + ", readPosition "
                + Admin.field(stats, "readPosition");
    }

    /** Whether the subscription's cursor holds `id` acknowledged: at or before its mark-delete
     *  position, or inside one of its individually deleted ranges ("(l:e..l:e]"). */
    static boolean acknowledgedInCursor(String stats, MessageId id) {
        if (stats.isEmpty() || !(id instanceof MessageIdImpl)) {
            return false;
        }
        MessageIdImpl m = (MessageIdImpl) id;
        long[] at = {m.getLedgerId(), m.getEntryId()};
        long[] md = parse(Admin.field(stats, "markDeletePosition"));
        if (md != null && compare(at, md) <= 0) {
            return true;
        }
        Matcher ranges = Pattern.compile("\\((\\d+):(-?\\d+)\\.\\.(\\d+):(-?\\d+)\\]")
                .matcher(Admin.field(stats, "individuallyDeletedMessages"));
        while (ranges.find()) {
            long[] lower = {Long.parseLong(ranges.group(1)), Long.parseLong(ranges.group(2))};
            long[] upper = {Long.parseLong(ranges.group(3)), Long.parseLong(ranges.group(4))};
            if (compare(at, lower) > 0 && compare(at, upper) <= 0) {
                return true;
            }
        }
        return false;
    }

    private static long[] parse(String position) {
        Matcher m = Pattern.compile("^(\\d+):(-?\\d+)").matcher(position);
        return m.find() ? new long[] {Long.parseLong(m.group(1)), Long.parseLong(m.group(2))} : null;
    }
}
