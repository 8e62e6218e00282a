// Reproduces docs/findings/stale-coordinator-after-ownership-reacquired.md with Pulsar's own Java
// client (the v4 API) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction its client never ends is aborted by its coordinator once its
// timeout passes, whichever broker serves the coordinator by then, and its partitions then deliver
// what follows it.
//
// What it does, per try, on a fresh one-bundle namespace and its topic P:
//  * a transaction T (timeout TXN_S) is opened whose coordinator N is on broker X, and sends M1 to P;
//    its client never ends it;
//  * the harness cuts X from the metadata store (ZooKeeper) for CUT_X s: its session expires and its
//    locks are deleted, while X keeps coordinator N loaded;
//  * a transactional client of the other broker B alone connects every coordinator: B acquires N's
//    bundle and loads N, replaying N's log (which fences X's log ledger); then that client is closed;
//  * B is cut from the metadata store for CUT_B s, so its session expires too and its locks go, before
//    X's link is mended; X establishes a new session and revalidates its locks: N's is gone, and
//    ResourceLockImpl.revalidate acquires it again; B then finds X's lock and lets N go;
//  * past T's timeout (plus a margin) M2 is sent to P without a transaction, the coordinator is asked
//    for T's state and a fresh reader reads P from its start.
// The bug shows when T is still unfinished (OPEN, ABORTING...) long after its timeout, or when its
// state cannot be read (3.0.0: the broker named its owner redirected the question to itself) and M2
// is given to no reader, while the control's T ended and its M2 was read: X serves N from
// the coordinator it loaded before the cut, whose log writes fail on the ledger B fenced, and which
// stays registered when its log's managed ledger is closed; P's readers are then held behind T's M1
// (M2 is given to none). A control ends each try: the same without B's cut (X finds B's lock and lets
// N go; B's coordinator aborts T at its timeout, and M2 is read), run first: the cut try leaves stale
// coordinators behind, and the new transactions opened after it say how many.
//
//   java -cp <pulsar-client jars>:. StaleCoordinatorAfterOwnershipReacquired --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--cut-x-s 24] [--cut-b-s 16] [--listener external]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class StaleCoordinatorAfterOwnershipReacquired extends Repro {
    private static final int TXN_S = 45;          // T's timeout: past every cut and mend below
    private static final int AFTER_TIMEOUT_S = 20; // how long past T's timeout its state is asked for
    private static final int READ_S = 20;        // how long the fresh reader waits for each next message
    private static final int SESSION_S = 6;      // the cluster's metadataStoreSessionTimeoutMillis
    private static final int MAX_TXNS = 40;      // transactions opened to find one whose coordinator is on X
    private static final int OPEN_S = 15;        // how long opening (or aborting) a transaction may take
    private static final int PROBES = 6;         // new transactions opened after the cut try (evidence)

    private final int cutXS;
    private final int cutBS;
    private PulsarClient client;
    private List<String> brokers;               // every broker's HTTP URL

    /** What one try (or its control) saw. */
    private record Seen(String label, String coordinator, String coordinatorDuring, String coordinatorAfter,
                        String status, List<String> read, String why) {
        boolean unfinished() {
            return TxnState.unfinished(status);
        }

        boolean ended() {
            return TxnState.ended(status);
        }

        /** P's later message M2, sent without a transaction and acknowledged, was read. */
        boolean readM2() {
            return read.contains("M2");
        }

        boolean stuck() {
            return TxnState.heldReaders(status, readM2());
        }
    }

    private StaleCoordinatorAfterOwnershipReacquired(Cli cli) {
        super(cli, PulsarClient.class, 6, 1);
        this.cutXS = cli.integer("--cut-x-s", 24);
        this.cutBS = cli.integer("--cut-b-s", 16);
    }

    public static void main(String[] argv) {
        Out.run(argv, StaleCoordinatorAfterOwnershipReacquired::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a transaction T (timeout " + TXN_S + " s) whose coordinator N is on "
                + "broker X sends M1 to P and is never ended, X cut from the metadata store for " + cutXS + " s, N "
                + "loaded by the other broker B, B cut for " + cutBS + " s before X's link is mended, then, "
                + AFTER_TIMEOUT_S + " s past T's timeout, M2 sent to P, T's state asked and a fresh read of P; then a "
                + "control without B's cut");
        client = setUp("client", () -> v4Client(true, 30, true));
        brokers = twoBrokersOrMore();
    }

    @Override
    void attempt(int n) throws Exception {
        // the control first: the cut leaves stale coordinators behind that time out new transactions
        Seen control = once(n, false);
        Seen cut = once(n, true);
        List<String> examples = new ArrayList<>();
        for (Seen seen : List.of(cut, control)) {
            examples.add(seen.label + ": coordinator N on " + seen.coordinator + ", loaded by " + seen.coordinatorDuring
                    + ", then on " + seen.coordinatorAfter + "; T's state " + AFTER_TIMEOUT_S + " s past its timeout: "
                    + seen.status + "; the fresh reader of P was given " + seen.read
                    + (seen.why.isEmpty() ? "" : " (" + seen.why + ")"));
        }
        boolean judged = cut.why.isEmpty() && control.why.isEmpty();
        String summary = !judged ? "not judged: " + (cut.why.isEmpty() ? "control: " + control.why : cut.why)
                : (cut.unfinished() ? "after both brokers' sessions expired in turn, T was still unfinished "
                + AFTER_TIMEOUT_S + " s past its timeout (" + cut.status + ") and the fresh reader of P was given "
                + cut.read
                : !cut.ended() ? "after both brokers' sessions expired in turn, T's state could not be read "
                + AFTER_TIMEOUT_S + " s past its timeout (" + cut.status + ") and the fresh reader of P was given "
                + cut.read + (cut.readM2() ? "" : " (M2, acknowledged, given to no reader)")
                : "T ended (" + cut.status + "), the fresh reader was given " + cut.read)
                + "; control without B's cut: " + control.status + ", given " + control.read;
        boolean controlClean = control.ended() && control.readM2();
        out.attempt(n, judged && cut.stuck() && controlClean, summary, examples);
    }

    private Seen once(int n, boolean cutB) throws Exception {
        String label = cutB ? "both cut" : "control";
        String namespace = "public/fx-tcreacq-" + run + "-" + n + (cutB ? "" : "c");
        String topic = "persistent://" + namespace + "/p";
        admin.createNamespace(namespace, 1);
        client.newConsumer(Schema.STRING).topic(topic).subscriptionName("keep").subscribe().close();
        // a transaction whose coordinator is on one broker (X); the others are aborted
        Transaction txn = null;
        String x = "";
        for (int i = 0; i < MAX_TXNS && txn == null; i++) {
            Transaction candidate;
            try {
                candidate = client.newTransaction().withTransactionTimeout(TXN_S, TimeUnit.SECONDS).build()
                        .get(OPEN_S, TimeUnit.SECONDS);
            } catch (Exception err) {
                out.info(label + " " + n, "a transaction could not be opened: " + Out.trim(Out.describe(err)));
                continue;
            }
            String tc = coordinatorVia(brokers.get(0), candidate);
            if (tc.equals(brokers.get(n % brokers.size())) || (i >= MAX_TXNS / 2 && tc.startsWith("http"))) {
                txn = candidate;
                x = tc;
            } else {
                candidate.abort().get(30, TimeUnit.SECONDS);
            }
        }
        if (txn == null) {
            return new Seen(label, "?", "", "", "", List.of(), "no transaction's coordinator could be located");
        }
        long timesOutAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(TXN_S);
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            producer.newMessage(txn).value("M1").sendAsync().get(30, TimeUnit.SECONDS);
        }
        String owner = x;
        String b = brokers.stream().filter(broker -> !broker.equals(owner)).findFirst().orElse("");
        out.info(label + " " + n, "T = " + txn.getTxnID() + ", coordinator N = " + txn.getTxnID().getMostSigBits()
                + " on X = " + x + ", sent M1 to " + topic + "; B = " + b);
        CutsInTurn cuts = new CutsInTurn(cutXS, SESSION_S);
        String notCut = cuts.cutX(x);
        if (!notCut.isEmpty()) {
            return new Seen(label, x, "", "", "", List.of(), notCut);
        }
        cuts.awaitXSessionGone();
        String during = coordinatorVia(b, txn);                           // B acquires N's bundle
        String bServiceUrl = Admin.field(new Admin(b).get("/lookup/v2/topic/persistent/" + namespace + "/p"),
                "brokerUrl");
        try (PulsarClient viaB = v4Builder(bServiceUrl, true, 30, true).build()) {
            // a transactional client connects every coordinator as it starts: B loads N, replaying its log
            Transaction probe = viaB.newTransaction().withTransactionTimeout(TXN_S, TimeUnit.SECONDS).build()
                    .get(30, TimeUnit.SECONDS);
            probe.abort().get(30, TimeUnit.SECONDS);
        } catch (Exception err) {
            out.info(label + " " + n, "B's transactional client: " + Out.trim(Out.describe(err)));
        }
        if (!during.equals(b)) {
            return new Seen(label, x, during, "", "", List.of(), "B did not take N during X's cut (owner: " + during + ")");
        }
        out.info(label + " " + n, "coordinator N loaded by B");
        notCut = cutB ? cuts.cutB(b, cutBS) : "";
        if (!notCut.isEmpty()) {
            return new Seen(label, x, during, "", "", List.of(), notCut);
        }
        sleepUntil(Math.max(cuts.mended() + TimeUnit.SECONDS.toNanos(8),
                timesOutAt + TimeUnit.SECONDS.toNanos(AFTER_TIMEOUT_S)));
        String after = coordinatorVia(b, txn);
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            producer.send("M2");
        }
        String status = Out.trim(new Admin(after.startsWith("http") ? after : b)
                .transactionMetadata(txn.getTxnID().getMostSigBits(), txn.getTxnID().getLeastSigBits()));
        List<String> read = new ArrayList<>();
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            for (int i = 0; i < 3; i++) {
                Message<String> message = reader.readNext(READ_S, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                read.add(message.getValue());
            }
        }
        out.info(label + " " + n, "coordinator N after: " + after + "; T: " + status + "; P read: " + read);
        if (cutB) {
            out.info(label + " " + n, "new transactions after it: " + newTransactions());
        }
        return new Seen(label, x, during, after, status, read, "");
    }

    /** Opens (and aborts) PROBES new transactions, one coordinator after another as the client goes round
     *  them: how many opened, and why the others did not (evidence, not judged). */
    private String newTransactions() {
        List<String> failed = new ArrayList<>();
        for (int i = 0; i < PROBES; i++) {
            try {
                Transaction probe = client.newTransaction().withTransactionTimeout(TXN_S, TimeUnit.SECONDS).build()
                        .get(OPEN_S, TimeUnit.SECONDS);
                probe.abort().get(OPEN_S, TimeUnit.SECONDS);
            } catch (Exception err) {
                failed.add(Out.trim(Out.describe(err)));
            }
        }
        return (PROBES - failed.size()) + " of " + PROBES + " opened and aborted" + (failed.isEmpty() ? "" : "; " + failed);
    }
}
