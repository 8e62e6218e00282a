// Reproduces docs/findings/stale-ledgers-after-ownership-reacquired.md with Pulsar's own Java client
// (the v4 API, no transaction) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message whose send was acknowledged is given to every reader that reads
// the topic from its start, whichever broker serves the topic by then.
//
// What it does, per try, on a fresh one-bundle namespace and its topic P (with a subscription, so
// it is never deleted as inactive):
//  * P is loaded on the broker X that owns it and M1 is sent there; the producer is closed, so
//    nothing writes to X's copy of P afterwards;
//  * the harness cuts X from the metadata store (ZooKeeper) for CUT_X s: its session expires and
//    its ownership lock is deleted, while X keeps P loaded (zookeeperSessionExpiredPolicy=reconnect);
//  * P is looked up through the other broker, B, which takes the bundle, opens P's managed ledger
//    (fencing X's ledger, adding one of its own) and is sent M2 by a client of B alone;
//  * B is cut from the metadata store for CUT_B s, so its session expires too and its lock goes,
//    before X's link is mended; X establishes a new session and revalidates its lock: the node is
//    gone, and ResourceLockImpl.revalidate acquires it again;
//  * once both links are mended, a fresh reader reads P from its start.
// The bug shows when the fresh reader is given M1 and not M2 (X serves P from the ledger list it
// loaded before the cut, which lacks B's ledger). A control ends each try: the same without B's cut
// (X finds B's lock and lets the bundle go; B serves both messages).
//
//   java -cp <pulsar-client jars>:. StaleLedgersAfterOwnershipReacquired --service-url pulsar://...
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

public final class StaleLedgersAfterOwnershipReacquired extends Repro {
    private static final int READ_S = 30;        // how long the fresh reader waits for each next message (a loaded
                                                 // machine delivered M2 after more than 10 s in a control)
    private static final int SESSION_S = 6;      // the cluster's metadataStoreSessionTimeoutMillis

    private final int cutXS;
    private final int cutBS;
    private List<String> brokers;               // every broker's HTTP URL

    /** What one try (or its control) saw. */
    private record Seen(String label, String owner, String ownerDuring, String ownerAfter, List<String> read,
                        String why, String ownerHasM2Ledger) {
        boolean stale() {
            return read.contains("M1") && !read.contains("M2");
        }
    }

    private StaleLedgersAfterOwnershipReacquired(Cli cli) {
        super(cli, PulsarClient.class, 6, 1);
        this.cutXS = cli.integer("--cut-x-s", 24);
        this.cutBS = cli.integer("--cut-b-s", 16);
    }

    public static void main(String[] argv) {
        Out.run(argv, StaleLedgersAfterOwnershipReacquired::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try a one-bundle namespace whose topic P is loaded on its owner X and "
                + "sent M1, X cut from the metadata store for " + cutXS + " s, P taken by the other broker B and sent "
                + "M2 there, B cut for " + cutBS + " s before X's link is mended, then a fresh read of P from its "
                + "start; then a control without B's cut");
        brokers = twoBrokersOrMore();
    }

    @Override
    void attempt(int n) throws Exception {
        Seen cut = once(n, true);
        Seen control = once(n, false);
        List<String> examples = new ArrayList<>();
        for (Seen seen : List.of(cut, control)) {
            examples.add(seen.label + ": P owned by " + seen.owner + ", taken by " + seen.ownerDuring + ", then owned by "
                    + seen.ownerAfter + "; the fresh reader was given " + seen.read + "; the owner's ledger list holds "
                    + "M2's ledger: " + seen.ownerHasM2Ledger + (seen.why.isEmpty() ? "" : " (" + seen.why + ")"));
        }
        boolean judged = cut.why.isEmpty() && control.why.isEmpty();
        String summary = !judged ? "not judged: " + (cut.why.isEmpty() ? "control: " + control.why : cut.why)
                : (cut.stale() ? "after both brokers' sessions expired in turn, the fresh reader was given M1 and not "
                + "M2 (sent through B and acknowledged); the owner's ledger list holds M2's ledger: " + cut.ownerHasM2Ledger
                : "the fresh reader was given " + cut.read) + "; control without B's cut: given " + control.read;
        // The owner's own ledger list says the reader was not merely slow (a loaded machine's control once was).
        boolean shows = judged && cut.stale() && !"yes".equals(cut.ownerHasM2Ledger) && !control.stale();
        out.attempt(n, shows, summary, examples);
    }

    private Seen once(int n, boolean cutB) throws Exception {
        String label = cutB ? "both cut" : "control";
        String namespace = "public/fx-reacq-" + run + "-" + n + (cutB ? "" : "c");
        String topic = "persistent://" + namespace + "/p";
        admin.createNamespace(namespace, 1);
        String x = ownerVia(brokers.get(0), namespace, "p");
        if (!x.startsWith("http")) {
            return new Seen(label, x, "", "", List.of(), "no owner for P: " + x, "");
        }
        String b = brokers.stream().filter(broker -> !broker.equals(x)).findFirst().orElse("");
        try (PulsarClient client = client(cli.required("--service-url"))) {
            client.newConsumer(Schema.STRING).topic(topic).subscriptionName("keep").subscribe().close();
            try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
                producer.send("M1");
            }
        }
        out.info(label + " " + n, "P = " + topic + " loaded on X = " + x + " with M1; B = " + b);
        CutsInTurn cuts = new CutsInTurn(cutXS, SESSION_S);
        String notCut = cuts.cutX(x);
        if (!notCut.isEmpty()) {
            return new Seen(label, x, "", "", List.of(), notCut, "");
        }
        cuts.awaitXSessionGone();
        String during = ownerVia(b, namespace, "p");
        if (!during.equals(b)) {
            return new Seen(label, x, during, "", List.of(), "B did not take P during X's cut (owner: " + during + ")", "");
        }
        String m2Ledger;
        String bServiceUrl = Admin.field(new Admin(b).get("/lookup/v2/topic/persistent/" + namespace + "/p"),
                "brokerUrl");
        try (PulsarClient viaB = client(bServiceUrl);
             Producer<String> producer = viaB.newProducer(Schema.STRING).topic(topic).create()) {
            MessageId m2 = producer.send("M2");
            m2Ledger = position(m2).split(":")[0];
            out.info(label + " " + n, "M2 sent through B at " + position(m2));
        }
        notCut = cutB ? cuts.cutB(b, cutBS) : "";
        if (!notCut.isEmpty()) {
            return new Seen(label, x, during, "", List.of(), notCut, "");
        }
        // both links mended, both sessions established again and every lock revalidated
        sleepUntil(cuts.mended() + TimeUnit.SECONDS.toNanos(8));
        String after = ownerVia(b, namespace, "p");
        List<String> read = new ArrayList<>();
        try (PulsarClient client = client(cli.required("--service-url"));
             Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                     .startMessageId(MessageId.earliest).create()) {
            for (int i = 0; i < 4; i++) {
                Message<String> message = reader.readNext(READ_S, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                read.add(message.getValue());
            }
        }
        String stats = new Admin(after.startsWith("http") ? after : b).internalStats(namespace, "p");
        String holds = stats.isEmpty() ? "? (no internal stats)"
                : stats.matches("(?s).*\"ledgerId\"\\s*:\\s*" + m2Ledger + "\\b.*") ? "yes" : "NO";
        out.info(label + " " + n, "owner after: " + after + "; internal stats there: " + Out.trim(stats));
        return new Seen(label, x, during, after, read, "", holds);
    }

    /** A client of `serviceUrl` alone (B's, to write M2 where B serves it), closed by the caller. */
    private PulsarClient client(String serviceUrl) throws Exception {
        return v4Builder(serviceUrl, false, 30, true).build();
    }
}
