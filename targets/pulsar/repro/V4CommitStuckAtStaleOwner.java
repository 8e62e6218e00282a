// Reproduces the lead of docs/results.md#2026-12-03-overrun with Pulsar's own Java client (the v4 API)
// and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a commit of a transaction whose coordinator and participants are up ends in
// a commit marker on every partition it wrote to, whichever broker serves the partition by then.
//
// What it does, per try, on a fresh namespace of BUNDLES bundles and TOPICS topics:
//  * every topic is looked up through each broker (each broker's metadata cache then holds its
//    bundle's ownership), and a transaction is opened whose coordinator lives on the broker X that
//    owns one of the topics, P; the transaction sends one message to P;
//  * the harness cuts X from the metadata store (ZooKeeper) for CUT seconds, longer than the
//    session (6 s): X's session expires and its ownership locks are deleted; meanwhile P is looked
//    up through the other broker, B, which takes its bundle;
//  * the link is mended, X's session is established again and X lets go of P's bundle; then the
//    transaction is committed, and a fresh reader reads P from its start.
// The bug shows when the commit is not answered OK within COMMIT_S s and P's message stays unread:
// X's coordinator sends END_TXN_ON_PARTITION for P to X itself (TransactionBufferHandlerImpl.getClientCnx
// -> NamespaceService.getOwnerAsync, which reads the ownership lock through X's metadata cache, and
// up to 3.2 that cache is not invalidated when the session is established again: it still says X),
// and X refuses each as "not served by this instance", for as long as the cache entry lives.
// A control ends each try: the same without the cut (the commit is answered, the message read).
//
//   java -cp <pulsar-client jars>:. V4CommitStuckAtStaleOwner --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--cut-s 14]

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4CommitStuckAtStaleOwner extends Repro {
    private static final int BUNDLES = 8;
    private static final int TOPICS = 16;
    private static final int COMMIT_S = 40;     // how long the commit may take before it counts as stuck
    private static final int READ_S = 15;       // how long the fresh reader waits for the message
    private static final int MAX_TXNS = 12;     // transactions opened to find one whose coordinator is on X

    private final int cutS;
    private PulsarClient client;
    private List<String> brokers;               // every broker's HTTP URL

    /** What one try (or its control) saw. */
    private record Seen(String label, String ownerBefore, String ownerDuring, String commit, boolean read,
                        String status) {
        boolean stuck() {
            return !commit.equals("ok") && !read;
        }
    }

    private V4CommitStuckAtStaleOwner(Cli cli) {
        super(cli, PulsarClient.class, 6, 1);
        this.cutS = cli.integer("--cut-s", 14);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CommitStuckAtStaleOwner::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a fresh namespace of " + BUNDLES + " bundles and " + TOPICS
                + " topics, a transaction whose coordinator is on the broker X owning topic P sends to P, X is cut "
                + "from the metadata store for " + cutS + " s while the other broker takes P, then the commit ("
                + COMMIT_S + " s) and a fresh read of P (" + READ_S + " s); then a control without the cut");
        client = setUp("client", () -> v4Client(true, 30, true));
        brokers = twoBrokersOrMore();
    }

    @Override
    void attempt(int n) throws Exception {
        List<String> examples = new ArrayList<>();
        Seen cut = once(n, true);
        Seen control = once(n, false);
        for (Seen seen : List.of(cut, control)) {
            examples.add(seen.label + ": P owned by " + seen.ownerBefore + ", during the cut by " + seen.ownerDuring
                    + "; commit " + seen.commit + "; message read " + seen.read + "; coordinator says " + seen.status);
        }
        boolean judged = cut.ownerDuring.startsWith("http") && !cut.ownerDuring.equals(cut.ownerBefore);
        String summary = !judged ? "not judged: the other broker did not take P during the cut (" + cut.ownerDuring + ")"
                : (cut.stuck() ? "the commit after the cut was not answered OK within " + COMMIT_S + " s and P's message "
                + "stays unread (coordinator: " + cut.status + ")" : "the commit after the cut ended (" + cut.commit
                + ", message read " + cut.read + ")") + "; control without the cut: "
                + (control.stuck() ? "ALSO stuck" : "commit " + control.commit + ", read " + control.read);
        out.attempt(n, judged && cut.stuck() && !control.stuck(), summary, examples);
    }

    private Seen once(int n, boolean withCut) throws Exception {
        String label = withCut ? "cut" : "control";
        String namespace = "public/fx-stale-" + run + "-" + n + (withCut ? "" : "c");
        admin.createNamespace(namespace, BUNDLES);
        Map<String, String> owners = new LinkedHashMap<>();
        for (int t = 0; t < TOPICS; t++) {
            String topic = "t" + t;
            for (String broker : brokers) {      // each broker reads the ownership through its cache
                owners.put(topic, ownerVia(broker, namespace, topic));
            }
        }
        // a transaction whose coordinator is on the owner of one of the topics
        Transaction txn = null;
        String x = "";
        String p = "";
        for (int i = 0; i < MAX_TXNS && txn == null; i++) {
            Transaction candidate = newTxn(client, 5);
            String tc = coordinatorVia(brokers.get(0), candidate);
            for (Map.Entry<String, String> owned : owners.entrySet()) {
                if (owned.getValue().equals(tc)) {
                    txn = candidate;
                    x = tc;
                    p = owned.getKey();
                    break;
                }
            }
            if (txn == null) {
                candidate.abort().get(30, TimeUnit.SECONDS);
            }
        }
        if (txn == null) {
            return new Seen(label, "?", "no transaction's coordinator owns a topic", "not tried", false, "");
        }
        String topic = "persistent://" + namespace + "/" + p;
        String value = label + "-" + n;
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            producer.newMessage(txn).value(value).sendAsync().get(30, TimeUnit.SECONDS);
        }
        out.info(label + " " + n, "transaction " + txn.getTxnID() + " (coordinator on " + x + ") sent to " + topic);
        String ownerDuring = x;
        if (withCut) {
            if (!cutFromMetadata(x, cutS)) {
                return new Seen(label, x, "the cut was not made", "not tried", false, "");
            }
            Out.sleep(8_000);                      // past the 6 s session: X's locks are gone
            String owner = x;
            String other = brokers.stream().filter(b -> !b.equals(owner)).findFirst().orElse("");
            ownerDuring = ownerVia(other, namespace, p);
            Out.sleep((cutS - 8) * 1_000L + 12_000);   // the mend, the new session, X letting go of P
        }
        String commit;
        try {
            txn.commit().get(COMMIT_S, TimeUnit.SECONDS);
            commit = "ok";
        } catch (java.util.concurrent.TimeoutException err) {
            commit = "no answer in " + COMMIT_S + " s";
        } catch (Exception err) {
            commit = "failed: " + Out.trim(Out.describe(err));
        }
        String status = Out.trim(admin.transactionMetadata(txn.getTxnID().getMostSigBits(),
                txn.getTxnID().getLeastSigBits()));
        boolean read = false;
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic).startMessageId(MessageId.earliest)
                .create()) {
            Message<String> message = reader.readNext(READ_S, TimeUnit.SECONDS);
            read = message != null && value.equals(message.getValue());
        }
        return new Seen(label, x, ownerDuring, commit, read, status);
    }
}
