// Reproduces docs/findings/v4-abort-marker-skipped-on-closing-topic.md with Pulsar's own Java client
// (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: once a transaction's abort returns OK, each partition it wrote to has its
// abort marker, so readers skip its messages and go on to the messages after them.
//
// What it does, per try, ROUNDS rounds, each on a fresh topic of one namespace (one bundle):
//  * TXNS transactions are opened and each sends one message to the topic (all sends acknowledged);
//  * the topic is unloaded (`pulsar-admin topics unload`, a topic's own close: its bundle stays
//    owned) and, DELAY ms after the unload was asked for, every transaction is aborted at once;
//  * once the unload and the aborts are answered, a plain (non-transactional) message, the
//    sentinel, is published, and a fresh subscription reads the topic from its start.
// The bug shows when the sentinel is never delivered: the topic's next load replays a transaction
// whose abort returned OK as still open, and its read horizon (maxReadPosition) stays before that
// transaction's message. Why: TopicTransactionBuffer.abortTxn answers OK without writing a marker
// when the buffer is not Ready, and PersistentTopic.close puts the buffer in Close first, while the
// topic stays in the broker's map until its managed ledger is closed: an END_TXN_ON_PARTITION that
// arrives in between finds the closing topic (ServerCnx.handleEndTxnOnPartition, getTopicIfExists).
// Nothing aborts the transaction later unless another transaction of the same coordinator ends on
// that topic (the low-watermark abort). Two controls end each try: a round that aborts without the
// unload (the buffer is Ready: every marker written) and one that commits with it (commitTxn has
// no such branch; its failed marker write is retried).
//
//   java -cp <pulsar-client jars>:. V4AbortMarkerSkippedOnClosingTopic --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 2] [--rounds 6] [--txns 48] [--delay-ms 0]

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

public final class V4AbortMarkerSkippedOnClosingTopic extends Repro {
    private static final int READ_S = 20;      // how long the fresh subscription waits for the sentinel

    private final String namespace = "public/fx-abort-" + run;
    private final int rounds;
    private final int txns;
    private final long delayMs;
    private PulsarClient client;

    /** A round's shape: the load's rounds, then the two controls. */
    private enum Kind {
        ABORT_WITH_UNLOAD("aborts, unload"), ABORT_ONLY("control: aborts, no unload"),
        COMMIT_WITH_UNLOAD("control: commits, unload");

        final String label;

        Kind(String label) {
            this.label = label;
        }
    }

    /** What one round saw. */
    private record Round(int r, Kind kind, int endedOk, int endedFailed, long unloadMs, String unload,
                         boolean sentinel, List<String> abortedRead, List<String> holders, String buffer) {
        boolean stuck() {
            return !sentinel;
        }
    }

    private V4AbortMarkerSkippedOnClosingTopic(Cli cli) {
        super(cli, PulsarClient.class, 8, 2);
        this.rounds = Math.max(3, cli.integer("--rounds", 6));
        this.txns = cli.integer("--txns", 48);
        this.delayMs = cli.integer("--delay-ms", 0);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4AbortMarkerSkippedOnClosingTopic::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of " + rounds + " rounds; per round a fresh topic of " + namespace + ", "
                + txns + " transactions send one message each, the topic is unloaded and " + delayMs
                + " ms later every transaction is aborted (the last two rounds are controls: aborts without the unload, "
                + "commits with it); then a plain "
                + "sentinel message, read by a fresh subscription from the start (" + READ_S + " s)");
        client = namespaceAndClient(namespace);
    }

    @Override
    void attempt(int n) throws Exception {
        List<Round> seen = new ArrayList<>();
        for (int r = 1; r <= rounds; r++) {
            seen.add(round(n, r, r == rounds ? Kind.COMMIT_WITH_UNLOAD
                    : r == rounds - 1 ? Kind.ABORT_ONLY : Kind.ABORT_WITH_UNLOAD));
        }
        List<String> examples = new ArrayList<>();
        for (Round round : seen) {
            if (round.stuck() || !round.abortedRead.isEmpty()) {
                examples.add(describe(n, round));
            }
        }
        List<Round> aborting = seen.stream().filter(x -> x.kind == Kind.ABORT_WITH_UNLOAD).toList();
        long stuck = aborting.stream().filter(Round::stuck).count();
        List<Round> controls = seen.stream().filter(x -> x.kind != Kind.ABORT_WITH_UNLOAD).toList();
        String summary = stuck + " of " + aborting.size() + " rounds with aborts left the topic holding back its "
                + "later messages (the sentinel never delivered)"
                + (stuck == 0 ? "" : ", each behind a transaction whose abort returned OK")
                + "; aborts answered OK per round " + aborting.stream().map(x -> x.endedOk + "/" + txns).toList()
                + controls.stream().map(x -> "; " + x.kind.label + ": " + (x.stuck() ? "ALSO held back"
                : "sentinel delivered")).reduce("", String::concat) + "; aborted messages delivered: "
                + seen.stream().mapToInt(x -> x.abortedRead.size()).sum();
        boolean shows = stuck > 0 || seen.stream().anyMatch(x -> !x.abortedRead.isEmpty());
        out.attempt(n, shows, summary, examples);
    }

    private String describe(int n, Round round) {
        return "try " + n + " round " + round.r + " (" + round.kind.label + "): unload " + round.unload
                + " in " + round.unloadMs + " ms; " + round.endedOk + " ended OK, " + round.endedFailed
                + " failed; sentinel " + (round.sentinel ? "delivered" : "NOT delivered") + "; " + round.holders.size()
                + " transactions ended OK that the reloaded buffer holds open, e.g. "
                + round.holders.subList(0, Math.min(2, round.holders.size())) + (round.abortedRead.isEmpty() ? "" : "; aborted values read " + round.abortedRead)
                + "; buffer " + round.buffer;
    }

    private Round round(int n, int r, Kind kind) throws Exception {
        boolean commits = kind == Kind.COMMIT_WITH_UNLOAD;
        String local = "t-" + n + "-" + r;
        String topic = "persistent://" + namespace + "/" + local;
        Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(30, TimeUnit.SECONDS).create();
        OneMessageEach sent = oneMessageEach(client, producer, txns, 5, run + "/" + n + "/" + r);
        List<Transaction> open = sent.txns();
        List<String> values = sent.values();

        long t0 = System.nanoTime();
        CompletableFuture<String> unload = CompletableFuture.supplyAsync(() -> {
            if (kind == Kind.ABORT_ONLY) {
                return "not asked";
            }
            try {
                admin.unloadTopic(namespace, local);
                return "ok";
            } catch (Exception err) {
                return "failed: " + Out.trim(Out.describe(err));
            }
        });
        if (delayMs > 0) {
            Thread.sleep(delayMs);
        }
        List<CompletableFuture<Void>> ends = new ArrayList<>();
        for (Transaction txn : open) {
            ends.add(commits ? txn.commit() : txn.abort());
        }
        String unloadResult = unload.get(90, TimeUnit.SECONDS);
        long unloadMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        int ok = 0;
        int failed = 0;
        List<TxnID> endedOk = new ArrayList<>();
        for (int i = 0; i < ends.size(); i++) {
            try {
                ends.get(i).get(90, TimeUnit.SECONDS);
                ok++;
                endedOk.add(open.get(i).getTxnID());
            } catch (Exception err) {
                failed++;
            }
        }

        String sentinel = run + "/" + n + "/" + r + "/sentinel";
        producer.newMessage().value(sentinel).send();
        producer.close();
        Set<String> read = readUntilSentinel(client, topic, "check", READ_S);
        List<String> abortedRead = new ArrayList<>();
        if (!commits) {
            for (String value : values) {
                if (read.contains(value)) {
                    abortedRead.add(value);
                }
            }
        }
        boolean delivered = read.contains(sentinel);
        List<String> holders = new ArrayList<>();
        String buffer = "";
        if (!delivered) {
            buffer = Out.trim(admin.transactionBufferStats(namespace, local));
            for (TxnID id : endedOk) {
                String stats = admin.transactionInBuffer(namespace, local, id.getMostSigBits(), id.getLeastSigBits());
                if (stats.contains("\"aborted\":false") && stats.matches("(?s).*\"startPosition\"\\s*:\\s*\"\\d.*")) {
                    holders.add(id + " (" + (commits ? "commit" : "abort") + " OK; its buffer: " + Out.trim(stats)
                            + "; coordinator: " + Out.trim(admin.transactionMetadata(id.getMostSigBits(),
                            id.getLeastSigBits())) + ")");
                }
            }
        }
        return new Round(r, kind, ok, failed, unloadMs, unloadResult, delivered, abortedRead, holders, buffer);
    }
}
