// Reproduces docs/findings/aborted-read-after-terminated-reload.md with Pulsar's own
// Java client. Written by txnbench (not fetched).
//
// What Pulsar promises: a message published in a transaction that was aborted is never delivered
// to a subscription, whatever happens to the topic afterwards.
// A broker that loads a topic rebuilds its transaction buffer (TopicTransactionBufferRecover):
// the aborted set and max read position of the last snapshot, then a replay of the entries from
// the snapshot's max read position to the managed ledger's last confirmed entry, which adds the
// aborts (markers) and open transactions written since. The replay runs only
// `if (lastConfirmedEntry.getEntryId() != -1)`. A terminated managed ledger's last confirmed entry
// is its terminated position, `<current ledger>:-1` when the current ledger was still empty (a
// ledger is opened at every load and rollover), so the replay is skipped; the buffer ends Ready
// with only the snapshot's aborts and, no open transaction known, the max read position at the
// end: every transactional message written after the snapshot is dispatched, aborted or not.
//
// Per try, two topics in a namespace that retains everything, a durable subscription on each
// made first: one message in a transaction, committed (the buffer's first snapshot); then
// ABORTED messages in a transaction, aborted (answered OK), and one more committed. Each topic is
// unloaded and loaded again (its current ledger is then a new, empty one); the first is then
// terminated (its end: <that ledger>:-1) and both are unloaded again (the control: not terminated). A consumer of the
// subscription then receives until nothing arrives for RECEIVE_WAIT_S. The bug shows when the
// terminated topic delivers a message of the aborted transaction.
// (The broker's snapshot timer is set long, transactionBufferSnapshotMinTimeInMillis, so the
// abort is not in a snapshot: in the release matrix the broker died 0.3 s after the abort.)
//
//   java -cp <pulsar-client jars>:. AbortedReadAfterTerminatedReload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class AbortedReadAfterTerminatedReload extends Repro {
    private static final int ABORTED = 3;
    private static final int RECEIVE_WAIT_S = 5;
    private static final String SUBSCRIPTION = "verify";
    private final String namespace = "public/tb-terminated-" + run;
    private PulsarClient client;

    private AbortedReadAfterTerminatedReload(Cli cli) {
        super(cli, PulsarClient.class);
    }

    public static void main(String[] argv) {
        Out.run(argv, AbortedReadAfterTerminatedReload::new);
    }

    @Override
    void setUp() throws Exception {
        client = setUp("namespace, client", () -> {
            admin.createNamespace(namespace, 1);
            return v4Client(true, 30, false);
        });
    }

    @Override
    void attempt(int n) throws Exception {
        List<String> terminated = scenario(n, "terminated-" + n, true);
        List<String> control = scenario(n, "control-" + n, false);
        boolean shows = terminated.stream().anyMatch(v -> v.startsWith("aborted"));
        boolean controlShows = control.stream().anyMatch(v -> v.startsWith("aborted"));
        List<String> examples = new ArrayList<>();
        examples.add("terminated + unloaded topic delivered " + terminated);
        examples.add("control (unloaded only) delivered " + control);
        String summary = shows
                ? "the terminated topic, loaded again, delivered values of the transaction whose abort was answered OK"
                  + (controlShows ? " (and so did the control)" : "; the control topic (unloaded, not terminated) did not")
                : "no aborted value delivered" + (controlShows ? " on the terminated topic, but the control gave some" : "");
        out.attempt(n, shows, summary, examples);
    }

    private List<String> scenario(int n, String name, boolean terminate) throws Exception {
        String topic = "persistent://" + namespace + "/" + name;
        client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe().close();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic)
                .sendTimeout(0, TimeUnit.SECONDS).create()) {
            Transaction first = newTxn(client, 1);
            producer.newMessage(first).value("committed-0").send();
            first.commit().get(60, TimeUnit.SECONDS);
            Out.sleep(1000);
            Transaction aborted = newTxn(client, 1);
            for (int i = 0; i < ABORTED; i++) {
                producer.newMessage(aborted).value("aborted-" + i).send();
            }
            aborted.abort().get(60, TimeUnit.SECONDS);
            out.info("try " + n + " " + name + " abort answered OK", aborted.getTxnID().toString());
            Transaction last = newTxn(client, 1);
            producer.newMessage(last).value("committed-1").send();
            last.commit().get(60, TimeUnit.SECONDS);
        }
        String path = "/admin/v2/persistent/" + namespace + "/" + name;
        // a load opens a new, empty ledger: terminated now, the ledger ends at <that ledger>:-1
        admin.put(path + "/unload", null);
        out.info("try " + n + " " + name + " unloaded, then loaded by", admin.get(path + "/internalStats")
                .replaceAll("(?s).*\"lastConfirmedEntry\"\\s*:\\s*\"([^\"]*)\".*", "lastConfirmedEntry $1"));
        if (terminate) {
            out.info("try " + n + " " + name + " terminated at", admin.call("POST", path + "/terminate", null));
        }
        admin.put(path + "/unload", null);
        out.info("try " + n + " " + name + " unloaded again", topic);
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic)
                .subscriptionName(SUBSCRIPTION).subscribe()) {
            return receiveAll(consumer, 20, RECEIVE_WAIT_S);
        }
    }
}
