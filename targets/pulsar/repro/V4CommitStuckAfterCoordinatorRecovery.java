// Reproduces the lead of docs/results.md#2026-12-03-intermediate with Pulsar's own Java client (the v4
// API) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a coordinator that dies while a commit is under way finishes it when it
// loads again (on this or another broker): a transaction its log holds as COMMITTING or ABORTING
// ends, and the partitions it wrote to go on delivering what follows it.
//
// What it does, per try, on a fresh namespace: a transaction whose coordinator lives on broker X
// sends one message to a topic P that the other broker, Y, serves. The link the brokers reach Y
// through is cut for CUT_S s, so X's END_TXN_ON_PARTITION for P cannot arrive; the transaction is
// committed by an application that then goes away (its own client, shut down once the coordinator
// says COMMITTING: X has logged it and waits on P), X is killed and started again, and the link
// mended; only the coordinator can finish the commit now. X's coordinator loads again (on Y, which takes it after X's 6 s session, or on X),
// replays its log and finds the transaction COMMITTING: it must send the commit to P again. Then a
// second transaction sends to P and commits, and a fresh reader reads P from its start.
// The bug shows when the first transaction stays COMMITTING at its coordinator and neither message
// is read: the recovery's end of the transaction failed ("Transaction coordinator with id N not
// found!": MLTransactionMetadataStore's replayComplete ends the recovered transactions before
// TransactionMetadataStoreService has registered the store) and nothing tries again, so P's read
// position stays behind the first message for good. A control ends each try: the same steps with
// the commit awaited before the kill (the coordinator recovers with nothing to finish).
//
//   java -cp <pulsar-client jars>:. V4CommitStuckAfterCoordinatorRecovery --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4CommitStuckAfterCoordinatorRecovery extends Repro {
    private static final int CUT_S = 5;         // the peer link to Y: down from before the commit until after the kill
    private static final int SETTLE_S = 40;     // after the restart: the coordinator's failover and recovery
    private static final int COMMIT_S = 30;     // how long a commit may take
    private static final int READ_S = 15;       // how long the fresh reader waits for each message
    private static final int MAX_TXNS = 6;      // transactions opened to find one whose coordinator is off P's broker
    private static final int BUNDLES = 8;
    private static final int TOPICS = 8;        // P is one of them, served by a broker other than the coordinator's

    private PulsarClient client;
    private List<String> brokers;               // every broker's HTTP URL

    /** What one try (or its control) saw. */
    private record Seen(String label, String setup, String commit, String status, String later, List<String> read) {
        boolean stuck() {
            return read.isEmpty() && status.contains("COMMITTING");
        }

        String describe() {
            return label + ": " + setup + "; first commit " + commit + "; its coordinator then says " + status
                    + "; second transaction " + later + "; a fresh reader of P read " + read;
        }
    }

    private V4CommitStuckAfterCoordinatorRecovery(Cli cli) {
        super(cli, PulsarClient.class, 6, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CommitStuckAfterCoordinatorRecovery::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a transaction whose coordinator is on broker X sends to a topic P on "
                + "broker Y, Y's peer link is cut for " + CUT_S + " s, the commit, X killed and started again, "
                + SETTLE_S + " s, a second transaction to P, a fresh read of P; then a control with the commit "
                + "awaited before the kill");
        client = setUp("client", () -> v4Client(true, 30, true));
        brokers = twoBrokersOrMore();
    }

    @Override
    void attempt(int n) throws Exception {
        Seen cut = once(n, true);
        Seen control = once(n, false);
        boolean judged = cut.setup.startsWith("coordinator on");
        String summary = !judged ? "not judged: " + cut.setup
                : (cut.stuck() ? "after the coordinator's broker died during the commit the transaction stays "
                + "COMMITTING and P delivers nothing (its later committed message neither)"
                : "the commit interrupted by the kill ended and P delivered " + cut.read) + "; control: "
                + (control.stuck() ? "ALSO stuck" : "read " + control.read);
        out.attempt(n, judged && cut.stuck() && !control.stuck(), summary,
                List.of(cut.describe(), control.describe()));
    }

    private Seen once(int n, boolean interrupted) throws Exception {
        String label = interrupted ? "kill during the commit" : "control";
        String namespace = "public/fx-tcrec-" + run + "-" + n + (interrupted ? "" : "c");
        admin.createNamespace(namespace, BUNDLES);
        // the application that commits the first transaction: it goes away once it has asked, so only
        // the coordinator can finish the commit (its own client would send END_TXN again on reconnect)
        try (App app = new App(v4Builder(cli.required("--service-url"), true, 30, true).build())) {
            return firstThenSecond(n, label, namespace, app, interrupted);
        }
    }

    /** The committing application's client, shut down once: when it goes away, or at the end. */
    private static final class App implements AutoCloseable {
        final PulsarClient client;
        private boolean gone;

        App(PulsarClient client) {
            this.client = client;
        }

        void goAway() throws PulsarClientException {
            if (!gone) {
                gone = true;
                client.shutdown();
            }
        }

        @Override
        public void close() throws PulsarClientException {
            goAway();
        }
    }

    private Seen firstThenSecond(int n, String label, String namespace, App app, boolean interrupted)
            throws Exception {
        // a transaction and a topic P on different brokers (an earlier try's kill may have left every
        // coordinator on one broker, so P is chosen among TOPICS topics once the coordinator is known)
        Transaction txn = null;
        String x = "";
        String y = "";
        String p = "";
        for (int i = 0; i < MAX_TXNS && txn == null; i++) {
            Transaction candidate = newTxn(app.client, 5);
            String tc = coordinatorVia(brokers.get(0), candidate);
            for (int t = 0; t < TOPICS && tc.startsWith("http") && p.isEmpty(); t++) {
                String owner = ownerVia(brokers.get(0), namespace, "p" + t);
                if (owner.startsWith("http") && !owner.equals(tc)) {
                    p = "p" + t;
                    y = owner;
                }
            }
            if (!p.isEmpty()) {
                txn = candidate;
                x = tc;
            } else {
                candidate.abort().get(30, TimeUnit.SECONDS);
            }
        }
        if (txn == null) {
            return new Seen(label, "no topic of " + TOPICS + " is off the coordinators' brokers", "not tried", "",
                    "", List.of());
        }
        String topic = "persistent://" + namespace + "/" + p;
        String setup = "coordinator on " + x + ", P on " + y;
        try (Producer<String> producer = app.client.newProducer(Schema.STRING).topic(topic).create()) {
            producer.newMessage(txn).value("first-" + n).sendAsync().get(30, TimeUnit.SECONDS);
        }
        out.info(label + " " + n, "transaction " + txn.getTxnID() + " sent to " + topic + "; " + setup);
        String commit;
        if (interrupted) {
            if (!out.ask("cut-peers:" + CUT_S, y, "cut the link the brokers reach " + y + " through now and mend it "
                    + CUT_S + " s later; answer `done` at once")) {
                return new Seen(label, "the cut was not made", "not tried", "", "", List.of());
            }
            txn.commit();
            if (!committing(txn, (CUT_S - 1) * 1_000L)) {   // X has logged COMMITTING and waits on P
                return new Seen(label, "the coordinator did not say COMMITTING within " + (CUT_S - 1)
                        + " s of the commit", "asked", "", "", List.of());
            }
            app.goAway();
            commit = "asked; the coordinator said COMMITTING; the application then went away";
        } else {
            commit = outcome(txn.commit());
            app.goAway();
        }
        if (!out.ask("kill-broker", x, "kill -9 the broker serving " + x + ", start it again and wait until it "
                + "is ready, then answer `done`")) {
            return new Seen(label, "the kill was not done", "not tried", "", "", List.of());
        }
        Out.sleep(SETTLE_S * 1_000L);
        String status = Out.trim(admin.transactionMetadata(txn.getTxnID().getMostSigBits(),
                txn.getTxnID().getLeastSigBits()));
        String later;
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            Transaction second = newTxn(client, 5);
            producer.newMessage(second).value("second-" + n).sendAsync().get(30, TimeUnit.SECONDS);
            later = "commit " + outcome(second.commit());
        } catch (Exception err) {
            later = "failed: " + Out.trim(Out.describe(err));
        }
        List<String> read = readFromStart(client, topic, 2, READ_S);
        return new Seen(label, setup, commit, status, later, read);
    }

    /** Whether the coordinator says `txn` is COMMITTING within `waitMs` (asked every 200 ms). */
    private boolean committing(Transaction txn, long waitMs) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        while (System.nanoTime() < deadline) {
            if (admin.transactionMetadata(txn.getTxnID().getMostSigBits(), txn.getTxnID().getLeastSigBits())
                    .contains("COMMITTING")) {
                return true;
            }
            Out.sleep(200);
        }
        return false;
    }

    private static String outcome(CompletableFuture<Void> commit) {
        try {
            commit.get(COMMIT_S, TimeUnit.SECONDS);
            return "ok";
        } catch (java.util.concurrent.TimeoutException err) {
            return "no answer in " + COMMIT_S + " s";
        } catch (Exception err) {
            return "failed: " + Out.trim(Out.describe(err));
        }
    }
}
