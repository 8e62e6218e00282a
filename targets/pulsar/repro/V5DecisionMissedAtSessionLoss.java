// Asks whether a v5 segment learns of a transaction's decision that was published while the
// segment's broker was cut from the metadata store. Pulsar's own Java client (the v5 API) writes
// and commits; its v4 layer reads the segments. Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction whose commit is answered OK is visible to every reader once
// the commit has returned, as long as no earlier transaction on the segment is still open.
//
// How 5.0.1 tells a segment of a decision (docs/findings/v5-decision-missed-at-session-loss.md):
// the coordinator writes the header, then creates an event node under the segment's events path;
// the segment's MetadataTransactionBuffer hears of it only through the metadata store's
// notification of that node (subscribeSequence) and then reads the headers of its open
// transactions. A broker cut from ZooKeeper past its session gets no notification of what was
// created meanwhile, and nothing reads the headers again when its session comes back.
//
// Per try, TOPICS fresh one-segment topics (their segments land on either broker) and one broker X
// cut (the tries alternate the brokers). Each topic gets one transaction of one message, all opened
// before the cut and committed 1 s into it (those whose coordinator is on X fail and time out after
// --txn-timeout-s; each holds only its own segment). After the cut is mended, every odd topic gets
// one more committed transaction (a "nudge": a decision event its segment does hear); the even ones
// stay quiet. Fresh Readers read every segment SETTLE_S after the cut ended, then the quiet segments
// again every POLL_S until each commit answered OK is visible or POLL_FOR_S have passed. The bug
// shows when a commit answered OK on a quiet segment of X is not visible SETTLE_S after the cut;
// the segments of the other broker are the control.
//
// The acknowledgement side learns of decisions the same way (MetadataPendingAckStore on
// subscribeSubscriptionEvents). ACK_TOPICS more topics get one plain message each, received by a
// queue consumer and acknowledged in a transaction of its own, which is aborted 1 s into the cut.
// A consumer that subscribes SETTLE_S after the cut must be given the message again (an aborted
// ack releases it); the bug shows when it is not, on a segment of X, while the other broker's are.
//
//   java -cp <pulsar-client-v5 jars>:. V5DecisionMissedAtSessionLoss --service-url pulsar://h:1,h:2
//       --admin-url http://<broker>:8080 [--tries 1] [--cut-s 10] [--txn-timeout-s 20] [--listener external]

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.time.Duration;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5DecisionMissedAtSessionLoss extends Repro {
    private static final int TOPICS = 10;
    private static final int ACK_TOPICS = 6;
    private static final int TXN_TIMEOUT_S = 20;    // a failed commit's transaction holds its own segment this long
    private static final int COMMIT_WAIT_S = 60;
    private static final int SETTLE_S = 30;         // after the cut: a decision event is heard within a second
    private static final int POLL_S = 20;
    private static final int POLL_FOR_S = 240;      // past the target's GC retention (120 s) and interval (30 s)
    private static final long QUIET_MS = 3_000;
    private static final long READ_BUDGET_MS = 30_000;

    private final int cutS;
    private V5Clients clients;
    private PulsarClient client;

    private V5DecisionMissedAtSessionLoss(Cli cli) {
        super(cli, PulsarClient.class);
        this.cutS = cli.integer("--cut-s", 10);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5DecisionMissedAtSessionLoss::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries on " + TOPICS + " one-segment topics each (on either broker), the "
                + "brokers cut in turn: one transaction of one message per topic, every commit 1 s into a " + cutS
                + " s cut from the metadata store, a nudge transaction on every odd topic after the cut, fresh "
                + "readers " + SETTLE_S + " s after the cut "
                + "and every " + POLL_S + " s after on the quiet topics, for " + POLL_FOR_S + " s; " + ACK_TOPICS
                + " topics more whose message is acknowledged in a transaction aborted 1 s into the cut");
        clients = V5Clients.of(this, TXN_TIMEOUT_S);
        client = clients.client;
        keepEverythingOnDefault();
    }

    /** One topic's part of a try: its segment, where it lives, what was decided on it and when it showed. */
    private static final class Probe {
        final String label;
        final String segment;
        final String owner;
        final String value;
        final boolean nudged;
        String answer = "";
        Long seenAfterS;            // seconds after the cut ended: the value read, or the message given again

        Probe(String label, String segment, String owner, String value, boolean nudged) {
            this.label = label;
            this.segment = segment;
            this.owner = owner;
            this.value = value;
            this.nudged = nudged;
        }

        boolean waiting() {
            return seenAfterS == null && answer.equals("ok");
        }
    }

    @Override
    void attempt(int n) throws Exception {
        List<String> brokers = serviceBrokers(cli.required("--service-url"));
        String victim = brokers.get(n % brokers.size());
        List<Probe> writes = new ArrayList<>();
        List<Probe> acks = new ArrayList<>();
        List<Producer<String>> producers = new ArrayList<>();
        List<QueueConsumer<String>> consumers = new ArrayList<>();
        List<Transaction> txns = new ArrayList<>();
        List<Transaction> ackTxns = new ArrayList<>();
        try {
            for (int i = 0; i < TOPICS + ACK_TOPICS; i++) {
                boolean ack = i >= TOPICS;
                String local = "sm-" + run + "-" + n + (ack ? "-k" : "-") + i;
                admin.createScalableTopic(local, 1);
                String segment = admin.firstSegment(local);
                Producer<String> producer = client.newProducer(Schema.string()).topic("topic://public/default/" + local)
                        .create();
                producers.add(producer);
                String value = run + "/" + n + "/" + (ack ? "k" : "t") + i;
                Probe probe = new Probe((ack ? "k" : "t") + i, segment, clients.owner(segment), value, !ack && i % 2 == 1);
                if (!ack) {
                    Transaction txn = client.newTransaction();
                    producer.newMessage().transaction(txn).value(value).send();
                    txns.add(txn);
                    writes.add(probe);
                    continue;
                }
                producer.newMessage().value(value).send();
                QueueConsumer<String> consumer = subscribe(local);
                consumers.add(consumer);
                Message<String> message = consumer.receive(Duration.ofSeconds(15));
                if (message == null || !message.value().equals(value)) {
                    out.error("try " + n + ": " + local + " did not deliver its message before the cut", null);
                    return;
                }
                Transaction txn = client.newTransaction();
                consumer.acknowledge(message.id(), txn);
                ackTxns.add(txn);
                acks.add(probe);
            }
            if (!cutFromMetadata(victim, cutS)) {
                out.error("try " + n + ": the cut was not made", null);
                return;
            }
            long cutAt = System.nanoTime();
            Out.sleep(1_000);
            List<CompletableFuture<Void>> ends = new ArrayList<>();
            for (Transaction txn : txns) {
                ends.add(txn.async().commit());
            }
            for (Transaction txn : ackTxns) {
                ends.add(txn.async().abort());
            }
            long answeredBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(COMMIT_WAIT_S);   // one bound for all
            for (int i = 0; i < ends.size(); i++) {
                (i < writes.size() ? writes.get(i) : acks.get(i - writes.size())).answer = answer(ends.get(i), answeredBy);
            }
            for (QueueConsumer<String> consumer : consumers) {
                consumer.close();
            }
            long mendedAt = cutAt + TimeUnit.SECONDS.toNanos(cutS);
            sleepUntil(mendedAt + TimeUnit.SECONDS.toNanos(3));
            for (int i = 0; i < writes.size(); i++) {
                if (writes.get(i).nudged) {
                    Transaction nudge = client.newTransaction();
                    producers.get(i).newMessage().transaction(nudge).value(run + "/" + n + "/nudge" + i).send();
                    nudge.commit();
                }
            }
            sleepUntil(mendedAt + TimeUnit.SECONDS.toNanos(SETTLE_S));
            look(writes, acks, mendedAt);
            boolean shows = false;
            for (Probe probe : concat(writes, acks)) {
                shows |= probe.waiting() && !probe.nudged && probe.owner.equals(victim);
            }
            long pollUntil = mendedAt + TimeUnit.SECONDS.toNanos(POLL_FOR_S);
            while (concat(writes, acks).stream().anyMatch(Probe::waiting) && System.nanoTime() < pollUntil) {
                Out.sleep(POLL_S * 1_000L);
                look(writes, acks, mendedAt);
            }
            List<String> lines = new ArrayList<>();
            for (Probe probe : concat(writes, acks)) {
                boolean ack = acks.contains(probe);
                String seen = ack ? "given again" : "visible";
                lines.add(probe.label + " (" + (ack ? "aborted ack" : probe.nudged ? "commit, nudged" : "commit, quiet")
                        + ", segment on " + (probe.owner.equals(victim) ? "the cut broker" : "the other broker") + "): "
                        + (ack ? "abort " : "commit ") + probe.answer + ", " + (probe.seenAfterS != null
                        ? seen + " by the look " + probe.seenAfterS + " s after the cut ended"
                        : probe.answer.equals("ok") ? "not " + seen + " " + POLL_FOR_S + " s after the cut ended"
                        : "not " + seen));
            }
            out.attempt(n, shows, (shows ? "a decision answered OK was not applied " + SETTLE_S + " s after the cut on a "
                    + "quiet segment of the cut broker" : "every decision answered OK applied " + SETTLE_S + " s after "
                    + "the cut") + " (cut " + victim + ")", lines);
        } finally {
            for (QueueConsumer<String> consumer : consumers) {
                closeQuietly(consumer);
            }
            for (Producer<String> producer : producers) {
                producer.close();
            }
        }
    }

    /** Reads the segments of the writes still waiting and subscribes to the acks' topics again; marks
     *  what shows with the seconds from the cut's end to the start of this look (a look takes seconds
     *  per topic: the reader waits QUIET_MS for more). */
    private void look(List<Probe> writes, List<Probe> acks, long mendedAt) throws Exception {
        long afterS = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - mendedAt);
        List<String> segments = new ArrayList<>();
        for (Probe probe : writes) {
            if (probe.seenAfterS == null) {
                segments.add(probe.segment);
            }
        }
        Set<String> read = readAll(segments);
        Set<String> given = new LinkedHashSet<>();
        for (Probe probe : acks) {
            if (probe.seenAfterS == null && probe.answer.equals("ok")) {
                String local = probe.segment.split("/")[4];
                QueueConsumer<String> consumer = subscribe(local);
                try {
                    Message<String> message = consumer.receive(Duration.ofMillis(QUIET_MS));
                    if (message != null) {
                        given.add(message.value());
                    }
                } finally {
                    closeQuietly(consumer);
                }
            }
        }
        for (Probe probe : concat(writes, acks)) {
            if (probe.seenAfterS == null && (read.contains(probe.value) || given.contains(probe.value))) {
                probe.seenAfterS = afterS;
            }
        }
    }

    private static List<Probe> concat(List<Probe> a, List<Probe> b) {
        List<Probe> all = new ArrayList<>(a);
        all.addAll(b);
        return all;
    }

    private QueueConsumer<String> subscribe(String local) throws Exception {
        return client.newQueueConsumer(Schema.string()).topic("topic://public/default/" + local)
                .subscriptionName("s").subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST).subscribe();
    }

    private static void closeQuietly(QueueConsumer<String> consumer) {
        try {
            consumer.close();
        } catch (Exception alreadyClosed) {
            // closed before, or its connection is gone: nothing is left to release
        }
    }

    /** The end's answer, waited for until `answeredBy` (System.nanoTime's clock): the ends were sent
     *  together, so one bound holds them all (a bound each, waited in turn, added up to minutes). */
    private static String answer(CompletableFuture<Void> commit, long answeredBy) {
        try {
            commit.get(Math.max(0, answeredBy - System.nanoTime()), TimeUnit.NANOSECONDS);
            return "ok";
        } catch (java.util.concurrent.TimeoutException err) {
            return "no answer in " + COMMIT_WAIT_S + " s";
        } catch (Exception err) {
            Throwable root = rootCause(err);
            return "failed (" + root.getClass().getSimpleName() + ")";
        }
    }

    /** Every value fresh Readers of the segments are given from their first message. */
    private Set<String> readAll(List<String> segments) {
        return clients.readValues(segments, QUIET_MS, READ_BUDGET_MS, out);
    }
}
