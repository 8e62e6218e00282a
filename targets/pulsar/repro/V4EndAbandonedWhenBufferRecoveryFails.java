// Reproduces docs/findings/v4-end-abandoned-when-buffer-recovery-fails.md with Pulsar's own Java
// client (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction whose coordinator has logged ABORTING (or COMMITTING) is
// ended on every partition it wrote to; its coordinator retries until it is, and the partitions'
// read horizons move past it.
//
// What it does, per try, one round per delay D of --delays and one control round, each on a fresh
// topic of one namespace (one bundle):
//  * TXNS transactions are opened and each sends one message to the topic (all sends acknowledged);
//  * the topic is unloaded once (its next load recovers its transaction buffer from the snapshot
//    topic), then every transaction is ended at once (the END_TXN_ON_PARTITIONs load the topic and
//    wait for that recovery), and D ms later the topic is unloaded a second time, while the
//    recovery may still be reading the snapshot topic (the control round skips this unload);
//  * 5 s after the ends are answered, and again after the read below, the coordinator is asked
//    for each transaction's status; a plain sentinel message is published and a fresh
//    subscription reads the topic from its start.
// The bug shows when a transaction stays ABORTING (COMMITTING) at its coordinator for both
// readings: the recovery that was cut short by the second unload failed the ends queued on it with
// the raw ManagedLedgerException ("ManagedLedger ... has already been closed":
// TopicTransactionBuffer's recoverExceptionally wraps only PulsarClientExceptions), which
// ServerCnx answers as UnknownError; TransactionMetadataStoreService.endTransaction treats that as
// not retryable and gives up (`End transaction fail!`), and nothing ends the transaction until the
// coordinator is loaded again. The topic's next load replays it as open: the sentinel and every
// later message stay behind it. Where the bug shows, every coordinator topic is then unloaded and
// the coordinators woken (new transactions), and the topic is read again from its start: what the
// coordinators' next load did with the stuck transactions.
//
//   java -cp <pulsar-client jars>:. V4EndAbandonedWhenBufferRecoveryFails --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 3] [--txns 48] [--delays 0,30,60,100,150,250]
//       [--end abort|commit]

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

public final class V4EndAbandonedWhenBufferRecoveryFails extends Repro {
    private static final int READ_S = 20;          // how long the fresh subscription waits for the sentinel
    private static final int SETTLE_S = 5;         // after the ends are answered, before the first status reading
    private static final int NO_SECOND_UNLOAD = -1;
    private static final int RELOAD_S = 60;        // how long the stuck transactions may take to end after the reload
    // what the admin API answers about a transaction whose coordinator is not loaded (HTTP 404 as for an ended one)
    private static final String COORDINATOR_AWAY = "coordinator with id";

    private final String namespace = "public/fx-recovering-" + run;
    private final int txns;
    private final List<Integer> delays = new ArrayList<>();
    private final boolean commits;
    private final String ending;
    private final String stuckStatus;
    private PulsarClient client;

    /** What one round saw. `stuck`: transactions still `stuckStatus` at both readings, with their status. */
    private record Round(int r, int delayMs, int endedOk, int endedFailed, String firstFailure, String unloads,
                         Map<String, String> stuck, boolean sentinel, String notPublished,
                         List<String> abortedRead, AfterReload after) {
        boolean control() {
            return delayMs == NO_SECOND_UNLOAD;
        }
    }

    private V4EndAbandonedWhenBufferRecoveryFails(Cli cli) {
        super(cli, PulsarClient.class, 8, 3);
        this.txns = cli.integer("--txns", 48);
        for (String delay : cli.get("--delays", "0,30,60,100,150,250").split(",")) {
            delays.add(Integer.parseInt(delay.trim()));
        }
        String end = cli.get("--end", "abort");
        if (!end.equals("abort") && !end.equals("commit")) {
            throw new IllegalArgumentException("--end must be abort or commit, got " + end);
        }
        this.commits = end.equals("commit");
        this.ending = commits ? "commit" : "abort";
        this.stuckStatus = commits ? "COMMITTING" : "ABORTING";
    }

    public static void main(String[] argv) {
        Out.run(argv, V4EndAbandonedWhenBufferRecoveryFails::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of " + (delays.size() + 1) + " rounds; per round a fresh topic of "
                + namespace + ", " + txns + " transactions send one message each, the topic is unloaded, every "
                + "transaction is sent its " + ending + " and the topic unloaded again D ms later (D in " + delays
                + "; the last round, a control, without the second unload); the coordinator's status of each "
                + "transaction " + SETTLE_S + " s after the ends and again after a fresh subscription has read the "
                + "topic from its start for a plain sentinel (" + READ_S + " s)");
        client = namespaceAndClient(namespace);
    }

    @Override
    void attempt(int n) throws Exception {
        List<Round> seen = new ArrayList<>();
        int r = 0;
        for (int delay : delays) {
            seen.add(round(n, ++r, delay));
        }
        Round control = round(n, ++r, NO_SECOND_UNLOAD);
        List<String> examples = new ArrayList<>();
        for (Round round : seen) {
            if (!round.stuck.isEmpty()) {
                examples.add(describe(n, round));
            }
        }
        if (!control.stuck.isEmpty() || !control.sentinel) {
            examples.add(describe(n, control));
        }
        long showing = seen.stream().filter(x -> !x.stuck.isEmpty()).count();
        String summary = showing + " of " + seen.size() + " rounds left transactions " + stuckStatus
                + " at their coordinator after their " + ending + " was answered (stuck per round "
                + seen.stream().map(x -> x.delayMs + " ms: " + x.stuck.size()).toList() + "; sentinel held back in "
                + seen.stream().filter(x -> !x.sentinel).count() + "); " + ending + "s answered OK per round "
                + seen.stream().map(x -> x.endedOk + "/" + txns).toList() + "; control (no second unload): "
                + control.stuck.size() + " stuck, sentinel " + (control.sentinel ? "delivered" : "HELD BACK")
                + seen.stream().filter(x -> x.after != null).map(x -> "; round " + x.r + " " + x.after)
                .reduce("", String::concat);
        out.attempt(n, showing > 0, summary, examples);
    }

    private String describe(int n, Round round) {
        List<String> some = round.stuck.entrySet().stream().limit(2)
                .map(e -> e.getKey() + " " + e.getValue()).toList();
        return "try " + n + " round " + round.r + " (" + (round.control() ? "control, no second unload"
                : "second unload " + round.delayMs + " ms after the ends") + "): unloads " + round.unloads + "; "
                + round.endedOk + " " + ending + "s OK, " + round.endedFailed + " failed"
                + (round.firstFailure.isEmpty() ? "" : " (e.g. " + round.firstFailure + ")") + "; "
                + round.stuck.size() + " still " + stuckStatus + " at their coordinator at both readings, e.g. " + some
                + "; sentinel " + (round.sentinel ? "delivered" : round.notPublished.isEmpty() ? "NOT delivered"
                : "not published (" + round.notPublished + ")")
                + (commits ? "" : "; aborted values read " + round.abortedRead.size())
                + (round.after == null ? "" : "; " + round.after);
    }

    private Round round(int n, int r, int delayMs) throws Exception {
        String local = "t-" + n + "-" + r;
        String topic = "persistent://" + namespace + "/" + local;
        Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(30, TimeUnit.SECONDS).create();
        OneMessageEach sent = oneMessageEach(client, producer, txns, 10, run + "/" + n + "/" + r);
        List<Transaction> open = sent.txns();
        List<String> values = sent.values();

        String first = unload(local);
        List<CompletableFuture<Void>> ends = new ArrayList<>();
        for (Transaction txn : open) {
            ends.add(commits ? txn.commit() : txn.abort());
        }
        String second = "not asked";
        if (delayMs != NO_SECOND_UNLOAD) {
            if (delayMs > 0) {
                Thread.sleep(delayMs);
            }
            second = unload(local);
        }
        int ok = 0;
        int failed = 0;
        String firstFailure = "";
        Set<String> failedValues = new HashSet<>();
        for (int i = 0; i < ends.size(); i++) {
            try {
                ends.get(i).get(90, TimeUnit.SECONDS);
                ok++;
            } catch (Exception err) {
                failed++;
                failedValues.add(values.get(i));
                if (firstFailure.isEmpty()) {
                    firstFailure = Out.trim(Out.describe(err));
                }
            }
        }
        Thread.sleep(TimeUnit.SECONDS.toMillis(SETTLE_S));
        Map<String, String> early = statuses(open);

        producer.closeAsync();   // its reconnection may wait on a buffer that never finished recovering
        String sentinel = run + "/" + n + "/" + r + "/sentinel";
        String published = publish(topic, sentinel);
        Set<String> read = published.isEmpty() ? readUntilSentinel(client, topic, "check", READ_S) : Set.of();
        Map<String, String> stuck = new LinkedHashMap<>();
        for (Map.Entry<String, String> later : statuses(open).entrySet()) {
            if (early.containsKey(later.getKey())) {
                stuck.put(later.getKey(), Out.trim(later.getValue()));
            }
        }
        List<String> abortedRead = new ArrayList<>();
        if (!commits) {
            for (String value : values) {
                if (read.contains(value)) {
                    abortedRead.add(value);
                }
            }
        }
        AfterReload after = stuck.isEmpty() ? null : reloadCoordinators(open, topic, sentinel, failedValues);
        return new Round(r, delayMs, ok, failed, firstFailure, first + ", " + second, stuck,
                read.contains(sentinel), published, abortedRead, after);
    }

    /** What the coordinators' next load did: how many transactions were still `stuckStatus` after it,
     *  whether a fresh subscription then got the sentinel, and how many values of transactions whose end
     *  had failed it received. */
    private record AfterReload(String unloads, int stillStuck, int away, boolean sentinel, int failedEndsRead) {
        @Override
        public String toString() {
            return "after the coordinators were loaded again (" + unloads + "): " + stillStuck + " still unfinished, "
                    + away + " with their coordinator not loaded, sentinel " + (sentinel ? "delivered" : "NOT delivered")
                    + ", " + failedEndsRead + " values of transactions whose end had failed delivered";
        }
    }

    /** Unloads every coordinator (its next load ends what its log holds as COMMITTING or ABORTING), waits
     *  up to RELOAD_S for the stuck transactions to end, and reads the topic again from its start. */
    private AfterReload reloadCoordinators(List<Transaction> open, String topic, String sentinel,
                                           Set<String> failedValues) throws Exception {
        List<String> unloads = new ArrayList<>();
        String partitions = admin.get("/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions");
        int coordinators = Integer.parseInt(partitions.replaceAll("(?s).*\"partitions\"\\s*:\\s*(\\d+).*", "$1"));
        for (int c = 0; c < coordinators; c++) {
            try {
                admin.unloadTopic("pulsar/system", "transaction_coordinator_assign-partition-" + c);
                unloads.add("ok");
            } catch (Exception err) {
                unloads.add("failed: " + Out.trim(Out.describe(err)));
            }
        }
        wakeCoordinators(2 * coordinators);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(RELOAD_S);
        List<String> answers = answers(open);
        while (answers.stream().anyMatch(a -> TxnState.unfinished(a) || a.contains(COORDINATOR_AWAY))
                && System.nanoTime() < deadline) {
            Thread.sleep(1000);
            answers = answers(open);
        }
        int stillStuck = (int) answers.stream().filter(TxnState::unfinished).count();
        int away = (int) answers.stream().filter(a -> a.contains(COORDINATOR_AWAY)).count();
        Set<String> read = readUntilSentinel(client, topic, "after-reload", READ_S);
        int failedRead = (int) failedValues.stream().filter(read::contains).count();
        return new AfterReload(coordinators + " coordinator(s): " + new HashSet<>(unloads), stillStuck, away,
                read.contains(sentinel), failedRead);
    }

    /** A coordinator loads when a client connects to it: `count` transactions opened and aborted make the
     *  client's coordinator handlers (one per coordinator, taken in turn) connect again. */
    private void wakeCoordinators(int count) {
        for (int i = 0; i < count; i++) {
            try {
                newTxn(client, 1).abort().get(30, TimeUnit.SECONDS);
            } catch (Exception err) {
                // a coordinator still loading: the next one, or the polling after, finds it
            }
        }
    }

    /** Each transaction's coordinator answer (JSON, or the admin call's failure text). */
    private List<String> answers(List<Transaction> open) {
        List<String> found = new ArrayList<>();
        for (Transaction txn : open) {
            TxnID id = txn.getTxnID();
            found.add(admin.transactionMetadata(id.getMostSigBits(), id.getLeastSigBits()));
        }
        return found;
    }

    /** Publishes `value` plainly with a producer of its own, trying for up to a minute: "" once it is
     *  acknowledged, else why not. */
    private String publish(String topic, String value) {
        String why = "";
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                    .sendTimeout(20, TimeUnit.SECONDS).create()) {
                producer.newMessage().value(value).send();
                return "";
            } catch (Exception err) {
                why = Out.trim(Out.describe(err));
            }
        }
        return why;
    }

    /** `pulsar-admin topics unload`: "ok", or why not. */
    private String unload(String local) {
        try {
            admin.unloadTopic(namespace, local);
            return "ok";
        } catch (Exception err) {
            return "failed: " + Out.trim(Out.describe(err));
        }
    }

    /** The transactions whose coordinator says `stuckStatus`, with what it says. */
    private Map<String, String> statuses(List<Transaction> open) {
        Map<String, String> found = new LinkedHashMap<>();
        List<String> answers = answers(open);
        for (int i = 0; i < open.size(); i++) {
            if (stuckStatus.equals(Admin.field(answers.get(i), "status"))) {
                found.put(open.get(i).getTxnID().toString(), answers.get(i));
            }
        }
        return found;
    }
}
