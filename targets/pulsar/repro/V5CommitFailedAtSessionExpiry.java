// Asks what the chaos run of docs/results.md#2026-12-03-intermediate could not: what becomes of a
// v5 transaction whose commit fails because its coordinator's broker lost its metadata session.
// Pulsar's own Java client (the v5 API) writes and commits; its v4 layer reads the segments.
// Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction is all or nothing, and the same on the live system as after
// a restart. A commit that fails may have committed or not; either way, once it has settled,
// every reader sees all of its messages or none, before and after the brokers restart.
//
// In the chaos run (5.0.1, v5, ZooKeeper as the metadata store), nine commits failed with
// `KeeperException$SessionExpired` while a broker was cut from ZooKeeper past its 6 s session;
// nothing of them was visible on the live system, some of their values were after every broker
// restarted. Either the decisions were lost (the transactions timed out and were aborted, and the
// cold reader raced the aborted set's recovery: docs/findings/v5-chaos-aborted-read.md) or they
// were written and the live brokers never applied them (a committed transaction readable only
// after a restart). The reads below tell the two apart.
//
// Per try: two scalable topics of one segment each; TXNS transactions, each one message to each
// topic; broker X (the tries alternate the brokers) is cut from the metadata store for CUT s (more
// than the 6 s session) and every transaction is committed 1 s into the cut (the ones whose
// coordinator is on X wait for X's session and fail). After the cut, the transaction timeout and
// SETTLE_S more, fresh Readers read both segments on the live system, and again LIVE_AGAIN_S later
// (a lag would have ended); every broker is restarted; Readers read again at once (the recovery
// race) and LATER_S after the restart (settled). The bug shows when a transaction's messages are
// not all or nothing in a settled read (the second live one or the later one), or the two disagree. A try in which no commit failed is not
// judged. What the reader at once saw is reported beside (the known race), not judged.
//
//   java -cp <pulsar-client-v5 jars>:. V5CommitFailedAtSessionExpiry --service-url pulsar://h:1,h:2
//       --admin-url http://<broker>:8080 [--tries 1] [--cut-s 10] [--txn-timeout-s 20]
//       [--later-s 40] [--listener external]

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5CommitFailedAtSessionExpiry extends Repro {
    private static final int TXNS = 8;
    private static final int COMMIT_WAIT_S = 60;    // how long a commit may take before it counts as unanswered
    private static final int SETTLE_S = 30;         // after the transaction timeout: the sweep, the decisions applied
    private static final long QUIET_MS = 5_000;     // a Reader stops after this long without a message
    private static final long READ_BUDGET_MS = 60_000;
    private static final int LIVE_AGAIN_S = 120;    // the second live read, after the first
    private static final int TXN_TIMEOUT_S = 20;    // the client's: the reads are planned after it

    private final int cutS;
    private final int timeoutS;
    private V5Clients clients;
    private PulsarClient client;

    private V5CommitFailedAtSessionExpiry(Cli cli) {
        super(cli, PulsarClient.class);
        this.cutS = cli.integer("--cut-s", 10);
        this.timeoutS = cli.integer("--txn-timeout-s", TXN_TIMEOUT_S);
    }

    public static void main(String[] argv) {
        Out.run(argv, V5CommitFailedAtSessionExpiry::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try " + TXNS + " transactions of one message to each of two one-segment "
                + "topics, a broker cut from the metadata store for " + cutS + " s, every commit 1 s into the cut; "
                + "fresh readers on the live system " + SETTLE_S + " s after the transaction timeout (" + timeoutS
                + " s), then every broker restarted and readers at once and later");
        clients = V5Clients.of(this, TXN_TIMEOUT_S);
        client = clients.client;
        keepEverythingOnDefault();
    }

    @Override
    void attempt(int n) throws Exception {
        List<String> brokers = serviceBrokers(cli.required("--service-url"));
        String victim = brokers.get(n % brokers.size());
        List<String> segments = new ArrayList<>();
        List<Producer<String>> producers = new ArrayList<>();
        Map<String, List<String>> valuesOf = new LinkedHashMap<>();   // transaction label -> its values
        List<Transaction> txns = new ArrayList<>();
        try {
            for (String side : List.of("a", "b")) {
                String local = "sx-" + run + "-" + n + side;
                admin.createScalableTopic(local, 1);
                segments.add(admin.firstSegment(local));
                producers.add(client.newProducer(Schema.string()).topic("topic://public/default/" + local).create());
            }
            for (int i = 0; i < TXNS; i++) {
                Transaction txn = client.newTransaction();
                List<String> values = new ArrayList<>();
                for (int p = 0; p < producers.size(); p++) {
                    String value = run + "/" + n + "/t" + i + "/" + p;
                    producers.get(p).newMessage().transaction(txn).value(value).send();
                    values.add(value);
                }
                txns.add(txn);
                valuesOf.put("t" + i, values);
            }
        } finally {
            for (Producer<String> producer : producers) {
                producer.close();
            }
        }
        if (!cutFromMetadata(victim, cutS)) {
            out.error("try " + n + ": the cut was not made", null);
            return;
        }
        long cutAt = System.nanoTime();
        Out.sleep(1_000);
        List<CompletableFuture<Void>> commits = new ArrayList<>();
        for (Transaction txn : txns) {
            commits.add(txn.async().commit());
        }
        Map<String, String> answers = new LinkedHashMap<>();
        int failed = 0;
        for (int i = 0; i < txns.size(); i++) {
            String answer;
            try {
                commits.get(i).get(COMMIT_WAIT_S, TimeUnit.SECONDS);
                answer = "ok";
            } catch (java.util.concurrent.TimeoutException err) {
                answer = "no answer in " + COMMIT_WAIT_S + " s";
                failed++;
            } catch (Exception err) {
                answer = "failed: " + Out.trim(Out.describe(err));
                failed++;
            }
            answers.put("t" + i, answer + " (state " + txns.get(i).state() + ")");
        }
        long sinceCutMs = (System.nanoTime() - cutAt) / 1_000_000;
        Out.sleep(Math.max(0, cutS * 1_000L - sinceCutMs) + (timeoutS + SETTLE_S) * 1_000L);
        Set<String> live = readAll(segments);
        Out.sleep(LIVE_AGAIN_S * 1_000L);       // a lag ends; a decision a segment never learned of does not
        Set<String> liveAgain = readAll(segments);
        List<String> owners = new ArrayList<>();
        for (String segment : segments) {
            owners.add(segment.substring(segment.lastIndexOf('/') + 1) + " of " + segment.split("/")[4] + " on "
                    + ownerOrWhy(segment));
        }
        out.info("try " + n + " owners", "cut " + victim + "; " + String.join(", ", owners));
        boolean restarted = true;
        for (String broker : brokers) {
            restarted &= out.ask("restart-broker", broker, "stop the broker serving " + broker
                    + " (SIGTERM), start it again and wait until it is ready, then answer `done`");
        }
        if (!restarted) {
            out.error("try " + n + ": the broker restart was not done", null);
            return;
        }
        long since = System.nanoTime();
        Set<String> early = readAll(segments);
        Out.sleep(Math.max(0, cli.integer("--later-s", 40) * 1_000L - (System.nanoTime() - since) / 1_000_000));
        Set<String> later = readAll(segments);

        List<String> examples = new ArrayList<>();
        boolean shows = false;
        for (Map.Entry<String, List<String>> txn : valuesOf.entrySet()) {
            int inLive = count(live, txn.getValue());
            int inLiveAgain = count(liveAgain, txn.getValue());
            int inEarly = count(early, txn.getValue());
            int inLater = count(later, txn.getValue());
            int all = txn.getValue().size();
            boolean torn = (inLiveAgain != 0 && inLiveAgain != all) || (inLater != 0 && inLater != all);
            boolean disagree = inLiveAgain != inLater;
            shows |= torn || disagree;
            examples.add(txn.getKey() + ": commit " + answers.get(txn.getKey()) + "; of its " + all
                    + " messages live " + inLive + ", live " + LIVE_AGAIN_S + " s later " + inLiveAgain
                    + ", reader at once after the restart " + inEarly + ", reader later " + inLater
                    + (torn || disagree ? "  <- " + (torn ? "not all or nothing" : "") + (torn && disagree ? ", " : "")
                    + (disagree ? "live and later disagree" : "") : ""));
        }
        String summary = failed + " of " + txns.size() + " commits failed or went unanswered during the cut of "
                + victim + "; " + (shows ? "a settled read is not all or nothing for a transaction, or the live "
                + "and the later read disagree" : "every transaction all or nothing, the same live and later");
        if (failed == 0) {
            out.error("try " + n + " not judged: no commit failed during the cut: " + String.join("; ", examples),
                    null);
            return;
        }
        out.attempt(n, shows, summary, examples);
    }

    /** Every value fresh Readers of the segments are given from their first message. */
    private Set<String> readAll(List<String> segments) {
        Set<String> values = new LinkedHashSet<>();
        for (String segment : segments) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READ_BUDGET_MS);
            try (org.apache.pulsar.client.api.Reader<String> reader = clients.segmentReader(segment, 60)) {
                boolean first = true;
                while (System.nanoTime() < deadline) {
                    org.apache.pulsar.client.api.Message<String> message = reader.readNext(
                            (int) (first ? Math.max(QUIET_MS, 15_000) : QUIET_MS), TimeUnit.MILLISECONDS);
                    if (message == null) {
                        break;
                    }
                    first = false;
                    values.add(message.getValue());
                }
            } catch (Exception err) {
                out.error("reading " + segment, err);
            }
        }
        return values;
    }

    /** The broker the client's lookup of `segment` connects to, or "? (why)". */
    private String ownerOrWhy(String segment) {
        try {
            return clients.owner(segment);
        } catch (Exception err) {
            return "? (" + Out.trim(Out.describe(err)) + ")";
        }
    }

    private static int count(Set<String> read, List<String> values) {
        int hits = 0;
        for (String value : values) {
            hits += read.contains(value) ? 1 : 0;
        }
        return hits;
    }
}
