// Reproduces the lead of docs/results.md#2026-12-05-timeout-lost with Pulsar's own Java client (the v4
// API) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction nobody ends is aborted by its coordinator once its timeout has
// passed, also when the coordinator was down at that moment: the coordinator that loads again
// replays its log, finds the transaction OPEN past its timeout and aborts it at once. Until then the
// partitions it wrote to hold their readers before its first message.
//
// What it does, per try, on a fresh namespace: an application opens TXNS transactions with a timeout
// of TIMEOUT_S s, each sending one message to a topic of its own, and never ends them (its client is
// closed after the try). Right away the broker X serving the first transaction's coordinator is
// killed (-9) and started again: X's coordinators load again (on the other broker after X's 6 s
// session, or on X) after every timeout has passed. SETTLE_S s after X is ready, the program asks each
// transaction's coordinator for it, commits one message to each topic in a second transaction, and
// reads each topic from its start with a fresh reader. While X restarts the program keeps the
// machine's cores busy (STRESS_THREADS spinning threads), as a chaos run's load does: the race below
// depends on how soon a broker thread runs.
//
// The bug shows when a transaction of a coordinator that loaded again is still OPEN SETTLE_S s after
// the load, long past its timeout, and its topic delivers nothing (its second, committed message
// neither). 2.10.5's MLTransactionMetadataStore replay starts the timeout tracker itself
// (`timeoutTracker.start()` in `replayComplete`), before TransactionMetadataStoreService has
// registered the store: when the tracker's timer fires first, `endTransactionForTimeout` finds no
// coordinator ("Transaction coordinator with id N not found!", logged at debug only), the expired
// transaction is dropped from the tracker, and the service's own `timeoutTracker.start()` after
// `stores.put` does nothing because a timeout is already scheduled. The control is in the same try:
// the transactions whose coordinator did not move must be aborted in time.
//
//   java -cp <pulsar-client jars>:. V4TimeoutLostAfterCoordinatorRecovery --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 4]

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4TimeoutLostAfterCoordinatorRecovery extends Repro {
    private static final int TXNS = 8;            // abandoned transactions per try, spread over the coordinators
    private static final int TIMEOUT_S = 5;       // their timeout: passed before any coordinator of X loads again
    private static final int SETTLE_S = 40;       // after X is ready: the coordinators' failover and recovery
    private static final int READ_S = 10;         // how long a fresh reader waits for each message
    private static final int STRESS_THREADS = 16; // spinning threads while X restarts and its coordinators load
    private static final int BUNDLES = 8;

    private PulsarClient client;
    private List<String> brokers;                 // every broker's HTTP URL

    /** One abandoned transaction: its coordinator's broker before the kill, what its coordinator
     *  said after the settle, and what a fresh reader of its topic read. */
    private record Abandoned(String txn, String topic, boolean moved, String status, String later,
                             List<String> read) {
        boolean stuck() {
            return TxnState.unfinished(status) && read.isEmpty();
        }

        String describe() {
            return txn + (moved ? " (its coordinator loaded again)" : " (its coordinator stayed)") + " on "
                    + topic + ": its coordinator says " + status + "; a second transaction's commit " + later
                    + "; a fresh reader read " + read;
        }
    }

    private V4TimeoutLostAfterCoordinatorRecovery(Cli cli) {
        super(cli, PulsarClient.class, 6, 4);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4TimeoutLostAfterCoordinatorRecovery::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try " + TXNS + " transactions (timeout " + TIMEOUT_S + " s) each "
                + "send one message and are abandoned, the broker of the first one's coordinator is killed and "
                + "started again (" + STRESS_THREADS + " spinning threads meanwhile), " + SETTLE_S + " s, then "
                + "each transaction's state, a second committed message per topic and a fresh read");
        client = setUp("client", () -> v4Client(true, 30, true));
        brokers = twoBrokersOrMore();
    }

    @Override
    void attempt(int n) throws Exception {
        String namespace = "public/fx-tmo-" + run + "-" + n;
        admin.createNamespace(namespace, BUNDLES);
        List<Transaction> txns = new ArrayList<>();
        // the application: it never ends its transactions, and is shut down after the try (that takes
        // seconds, longer than the timeout, so not before the kill)
        try (PulsarClient app = v4Builder(cli.required("--service-url"), true, 30, true).build()) {
            List<Producer<String>> producers = new ArrayList<>();
            for (int i = 0; i < TXNS; i++) {   // made first: the timeouts start at the first open
                producers.add(app.newProducer(Schema.STRING).topic("persistent://" + namespace + "/t" + i).create());
            }
            newTxn(app, 1).abort().get(30, TimeUnit.SECONDS);   // the coordinators connected before the clock starts
            long opened = System.nanoTime();
            List<CompletableFuture<Transaction>> opening = new ArrayList<>();
            for (int i = 0; i < TXNS; i++) {
                opening.add(app.newTransaction().withTransactionTimeout(TIMEOUT_S, TimeUnit.SECONDS).build());
            }
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < TXNS; i++) {
                Transaction txn = opening.get(i).get(30, TimeUnit.SECONDS);
                sends.add(producers.get(i).newMessage(txn).value("abandoned-" + n + "-" + i).sendAsync());
                txns.add(txn);
            }
            for (CompletableFuture<MessageId> send : sends) {
                send.get(30, TimeUnit.SECONDS);
            }
            long sentMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - opened);
            abandonAndKill(n, namespace, txns, opened, sentMs);
        }
    }

    /** Kills the broker of the first transaction's coordinator, waits, and judges the try. */
    private void abandonAndKill(int n, String namespace, List<Transaction> txns, long opened, long sentMs)
            throws Exception {
        List<String> coordinators = new ArrayList<>();
        Map<Long, String> owners = new HashMap<>();   // coordinator id -> its broker, asked once each
        for (Transaction txn : txns) {
            coordinators.add(owners.computeIfAbsent(txn.getTxnID().getMostSigBits(),
                    id -> coordinatorVia(brokers.get(0), txn)));
        }
        String x = coordinators.get(0);
        long beforeKillMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - opened);
        if (beforeKillMs > (TIMEOUT_S - 1) * 1_000L) {   // the timeouts could fire before the kill
            out.attempt(n, false, "not judged: " + beforeKillMs + " ms from the first open to the kill (sent at "
                    + sentMs + " ms)", List.of());
            return;
        }
        out.info("try " + n, TXNS + " transactions sent and abandoned; their coordinators' brokers " + coordinators
                + "; killing " + x + " " + beforeKillMs + " ms after the first open");
        boolean killed;
        AtomicBoolean spinning = new AtomicBoolean(true);
        List<Thread> spinners = spin(spinning);
        try {
            killed = out.ask("kill-broker", x, "kill -9 the broker serving " + x + ", start it again and wait "
                    + "until it is ready, then answer `done`");
            if (killed) {
                Out.sleep(SETTLE_S * 1_000L / 2);
            }
        } finally {
            spinning.set(false);
            for (Thread spinner : spinners) {
                spinner.join();
            }
        }
        if (!killed) {
            out.attempt(n, false, "not judged: the kill was not done", List.of());
            return;
        }
        Out.sleep(SETTLE_S * 1_000L / 2);
        List<Abandoned> seen = new ArrayList<>();
        for (int i = 0; i < TXNS; i++) {
            seen.add(look(txns.get(i), "persistent://" + namespace + "/t" + i, coordinators.get(i).equals(x), n));
        }
        List<Abandoned> moved = seen.stream().filter(Abandoned::moved).toList();
        List<Abandoned> stayed = seen.stream().filter(a -> !a.moved()).toList();
        long stuckMoved = moved.stream().filter(Abandoned::stuck).count();
        long stuckStayed = stayed.stream().filter(Abandoned::stuck).count();
        String summary = stuckMoved + " of " + moved.size() + " transactions whose coordinator loaded again are "
                + "still unfinished " + SETTLE_S + " s after the restart, past their " + TIMEOUT_S + " s timeout, "
                + "and their topics deliver nothing; control: " + stuckStayed + " of " + stayed.size()
                + " whose coordinator stayed";
        out.attempt(n, stuckMoved > 0 && stuckStayed == 0, summary,
                seen.stream().map(Abandoned::describe).toList());
    }

    /** The coordinator's answer for `txn`, a second transaction's message to `topic`, and a fresh read. */
    private Abandoned look(Transaction txn, String topic, boolean moved, int n) throws Exception {
        String status = Out.trim(admin.transactionMetadata(txn.getTxnID().getMostSigBits(),
                txn.getTxnID().getLeastSigBits()));
        String later;
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            Transaction second = client.newTransaction().withTransactionTimeout(1, TimeUnit.MINUTES).build()
                    .get(30, TimeUnit.SECONDS);
            producer.newMessage(second).value("second-" + n).sendAsync().get(30, TimeUnit.SECONDS);
            second.commit().get(30, TimeUnit.SECONDS);
            later = "ok";
        } catch (Exception err) {
            later = "failed: " + Out.trim(Out.describe(err));
        }
        List<String> read = readFromStart(client, topic, 2, READ_S);
        return new Abandoned(txn.getTxnID().toString(), topic, moved, status, later, read);
    }

    /** STRESS_THREADS daemon threads that spin until `spinning` is false. */
    private static List<Thread> spin(AtomicBoolean spinning) {
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < STRESS_THREADS; i++) {
            Thread thread = new Thread(() -> {
                long x = 0;
                while (spinning.get()) {
                    x += System.nanoTime() & 1;
                }
                if (x == -1) {
                    System.out.print("");
                }
            }, "spinner-" + i);
            thread.setDaemon(true);
            thread.start();
            threads.add(thread);
        }
        return threads;
    }
}
