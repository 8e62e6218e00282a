// Asks what the chaos-sessions run on 5.0.1 (docs/results.md#2026-12-03-sessions) showed once: a v5
// commit that failed with KeeperException$SessionExpired at its coordinator ("endTxn participant
// enumeration encountered an error") and whose message was then missing from the live read of a
// segment whose broker never lost its session, yet present after every broker restarted.
// Pulsar's own Java client (the v5 API) writes and commits; its v4 layer reads the segments.
// Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction is all or nothing and the same on the live system as after a
// restart. A commit that fails may have committed or not, but once it has settled every reader
// sees the same outcome.
//
// How 5.0.1 ends a transaction (TransactionCoordinatorV5.endTransaction): it writes the header's
// final state, then enumerates the transaction's participants (listOpsByTxn, a scan of the op
// records) and publishes one decision event per participant segment. When the enumeration fails
// after the header was written (the coordinator's broker loses its session meanwhile), the client
// is told the commit failed, the header says COMMITTED, and no event is published: no participant
// learns of it, the timeout sweep passes it over (it is not OPEN), and it stays pending, holding
// every later transaction of its segments, until the GC sweep publishes it again (after the
// retention: 900 s by default, 120 s on the target) or the segment is loaded again.
//
// Per try: TOPICS one-segment topics (on either broker), TXNS_PER_TOPIC transactions of one message
// on each, all opened and sent first; then every commit at once and, --cut-after-ms later (120 ms:
// the header writes have landed, the participant scans have not), broker X (the tries alternate) cut
// from the metadata store for --cut-s (past the 6 s session): commits whose coordinator is on X and
// that wrote the header before the cut then fail in the enumeration. Fresh Readers read every
// segment SETTLE_S after the cut ended (past the transaction timeout, so what failed without a
// header is aborted by then), then every POLL_S until POLL_FOR_S; every broker is restarted and
// Readers read LATER_S after (past the recovery race of docs/findings/v5-chaos-aborted-read.md).
// The bug shows when, on a segment of the broker that was not cut, a value missing from the first
// live look is visible later: a committed decision its participant was never told of. A try in
// which no commit failed (the cut broker led no coordinator) is not judged.
//
//   java -cp <pulsar-client-v5 jars>:. V5CommitUnannouncedAfterFailedFanOut --service-url pulsar://h:1,h:2
//       --admin-url http://<broker>:8080 [--tries 4] [--cut-s 10] [--cut-after-ms 120] [--txn-timeout-s 20]
//       [--listener external]

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5CommitUnannouncedAfterFailedFanOut extends Repro {
    private static final int TOPICS = 6;
    private static final int TXNS_PER_TOPIC = 8;
    private static final int CUT_AFTER_MS = 120;    // 48 header writes landed, none of their scans answered (tried: 40, 120, 250, 500)
    private static final int TXN_TIMEOUT_S = 20;    // a commit that failed before the header: aborted by then
    private static final int COMMIT_WAIT_S = 60;
    private static final int SETTLE_S = 30;         // after the cut: past the timeout, the sweep and its events
    private static final int POLL_S = 20;
    private static final int POLL_FOR_S = 200;      // past the target's GC retention (120 s) and interval (30 s)
    private static final int LATER_S = 40;          // after the restart: past the recovery race
    private static final long QUIET_MS = 3_000;
    private static final long READ_BUDGET_MS = 30_000;

    private final int cutS;
    private final int cutAfterMs;
    private V5Clients clients;
    private PulsarClient client;

    private V5CommitUnannouncedAfterFailedFanOut(Cli cli) {
        super(cli, PulsarClient.class);
        this.cutS = cli.nonNegative("--cut-s", 10);
        this.cutAfterMs = cli.nonNegative("--cut-after-ms", CUT_AFTER_MS);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5CommitUnannouncedAfterFailedFanOut::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries on " + TOPICS + " one-segment topics each (on either broker), "
                + TXNS_PER_TOPIC + " transactions of one message per topic, every commit at once and a broker cut "
                + "from the metadata store for " + cutS + " s " + cutAfterMs + " ms later (the brokers in turn); fresh "
                + "readers " + SETTLE_S + " s after the cut and every " + POLL_S + " s to " + POLL_FOR_S
                + " s, then every broker restarted and readers " + LATER_S + " s after");
        clients = V5Clients.of(this, TXN_TIMEOUT_S);
        client = clients.client;
        keepEverythingOnDefault();
    }

    /** One transaction of a try: its segment, where it lives, its commit's answer, when it showed. */
    private static final class Probe {
        final String label;
        final String segment;
        final String owner;
        final String value;
        String answer = "";
        Long seenAfterS;            // seconds after the cut ended: the value read
        boolean seenAfterRestart;

        Probe(String label, String segment, String owner, String value) {
            this.label = label;
            this.segment = segment;
            this.owner = owner;
            this.value = value;
        }
    }

    @Override
    void attempt(int n) throws Exception {
        List<String> brokers = serviceBrokers(cli.required("--service-url"));
        String victim = brokers.get(n % brokers.size());
        List<Probe> probes = new ArrayList<>();
        List<Transaction> txns = new ArrayList<>();
        List<Producer<String>> producers = new ArrayList<>();
        try {
            for (int t = 0; t < TOPICS; t++) {
                String local = "su-" + run + "-" + n + "-" + t;
                admin.createScalableTopic(local, 1);
                String segment = admin.firstSegment(local);
                Producer<String> producer = client.newProducer(Schema.string()).topic("topic://public/default/" + local)
                        .create();
                producers.add(producer);
                String owner = clients.owner(segment);
                for (int i = 0; i < TXNS_PER_TOPIC; i++) {
                    String value = run + "/" + n + "/" + t + "/" + i;
                    Transaction txn = client.newTransaction();
                    producer.newMessage().transaction(txn).value(value).send();
                    txns.add(txn);
                    probes.add(new Probe("s" + t + "t" + i, segment, owner, value));
                }
            }
        } finally {
            for (Producer<String> producer : producers) {
                producer.close();
            }
        }
        List<CompletableFuture<Void>> commits = new ArrayList<>();
        for (Transaction txn : txns) {
            commits.add(txn.async().commit());
        }
        Out.sleep(cutAfterMs);
        if (!cutFromMetadata(victim, cutS)) {
            out.error("try " + n + ": the cut was not made", null);
            return;
        }
        long mendedAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(cutS);
        int failed = 0;
        long answeredBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(COMMIT_WAIT_S);   // one bound for all 48
        for (int i = 0; i < probes.size(); i++) {
            probes.get(i).answer = answer(commits.get(i), answeredBy);
            failed += probes.get(i).answer.equals("ok") ? 0 : 1;
        }
        sleepUntil(mendedAt + TimeUnit.SECONDS.toNanos(SETTLE_S));
        look(probes, mendedAt);
        List<Probe> missing = new ArrayList<>();
        for (Probe probe : probes) {
            if (probe.seenAfterS == null) {
                missing.add(probe);
            }
        }
        long pollUntil = mendedAt + TimeUnit.SECONDS.toNanos(POLL_FOR_S);
        while (probes.stream().anyMatch(p -> p.seenAfterS == null) && System.nanoTime() < pollUntil) {
            Out.sleep(POLL_S * 1_000L);
            look(probes, mendedAt);
        }
        boolean restarted = true;
        for (String broker : brokers) {
            restarted &= out.ask("restart-broker", broker, "stop the broker serving " + broker
                    + " (SIGTERM), start it again and wait until it is ready, then answer `done`");
        }
        if (!restarted) {
            out.error("try " + n + ": the broker restart was not done", null);
            return;
        }
        Out.sleep(LATER_S * 1_000L);
        Set<String> later = readAll(segmentsOf(probes));
        boolean shows = false;
        List<String> lines = new ArrayList<>();
        for (Probe probe : probes) {
            probe.seenAfterRestart = later.contains(probe.value);
            boolean healthy = !probe.owner.equals(victim);
            boolean unannounced = healthy && missing.contains(probe)
                    && (probe.seenAfterS != null || probe.seenAfterRestart);
            shows |= unannounced;
            if (probe.answer.equals("ok") && probe.seenAfterS != null && probe.seenAfterS <= SETTLE_S) {
                continue;   // the many that went well: counted below, not listed
            }
            lines.add(probe.label + " (segment on " + (healthy ? "the broker not cut" : "the cut broker") + "): commit "
                    + probe.answer + ", " + (probe.seenAfterS != null ? "visible by the look " + probe.seenAfterS
                    + " s after the cut ended" : "not visible " + POLL_FOR_S + " s after the cut ended")
                    + ", after the restart " + (probe.seenAfterRestart ? "visible" : "not visible")
                    + (!unannounced ? "" : probe.answer.equals("ok") ? "  <- answered OK, held on a segment that kept its session"
                    : "  <- failed, yet committed: not applied by a participant that kept its session"));
        }
        long fine = probes.stream().filter(p -> p.answer.equals("ok") && p.seenAfterS != null && p.seenAfterS <= SETTLE_S)
                .count();
        lines.add(fine + " more commits answered OK and visible at the first look");
        String summary = failed + " of " + probes.size() + " commits failed or went unanswered (cut " + victim + " "
                + cutAfterMs + " ms after the commits were sent); " + (shows ? "a committed transaction was not "
                + "applied " + SETTLE_S + " s after the cut on a segment of the broker that was not cut"
                : "every transaction on the broker that was not cut settled by the first look");
        if (failed == 0) {
            out.error("try " + n + " not judged: no commit failed: " + String.join("; ", lines), null);
            return;
        }
        out.attempt(n, shows, summary, lines);
    }

    private static List<String> segmentsOf(List<Probe> probes) {
        Set<String> segments = new LinkedHashSet<>();
        for (Probe probe : probes) {
            segments.add(probe.segment);
        }
        return new ArrayList<>(segments);
    }

    /** Reads the segments of the transactions not seen yet; marks what shows with the seconds from the
     *  cut's end to the start of this look. */
    private void look(List<Probe> probes, long mendedAt) {
        long afterS = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - mendedAt);
        List<Probe> waiting = new ArrayList<>();
        for (Probe probe : probes) {
            if (probe.seenAfterS == null) {
                waiting.add(probe);
            }
        }
        Set<String> read = readAll(segmentsOf(waiting));
        for (Probe probe : waiting) {
            if (read.contains(probe.value)) {
                probe.seenAfterS = afterS;
            }
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
            return "failed (" + root.getClass().getSimpleName() + ": " + Out.trim(String.valueOf(root.getMessage())) + ")";
        }
    }

    /** Every value fresh Readers of the segments are given from their first message. */
    private Set<String> readAll(List<String> segments) {
        return clients.readValues(segments, QUIET_MS, READ_BUDGET_MS, out);
    }
}
