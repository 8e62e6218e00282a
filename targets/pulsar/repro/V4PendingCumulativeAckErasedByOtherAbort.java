// Probes a lead from the release matrix of 2026-12-03 (chaos.yaml, 5.0.1 and 4.0.8, v4): on the Failover
// input of the consume-transform-produce pipeline a transaction's cumulative ack was accepted, the
// transaction's commit returned OK after its topic had been loaded again (a broker killed), and the
// acknowledged message was delivered again 0.5 s later; a later transaction acknowledged past it and
// committed too (`lost-ack`). Between the ack and the reload, dozens of other transactions of the same
// consumer had tried a cumulative ack of the same message, been refused (TransactionConflict) and been
// aborted. Pulsar's own Java client (the v4 API) and the admin REST API only. Written by txnbench (not
// fetched).
//
// What Pulsar promises: a transaction whose commit returns OK has acknowledged what it acknowledged; a
// refused, aborted transaction changes nothing; a topic loaded again keeps both.
//
// What it does, per try: per case a namespace of one bundle (an unload moves only its topic), a topic of
// five unbatched messages, a Failover subscription with one consumer. Transaction A acknowledges the third
// message cumulatively (pending until A ends), then:
//   * `conflict-abort-reload`: transaction B acknowledges the same message cumulatively (refused: A holds
//     it), B is aborted, the namespace is unloaded (the next load replays the subscription's pending-ack
//     log), then A commits;
//   * `reload` (control): no B; the namespace is unloaded, then A commits;
//   * `conflict-abort` (control): B refused and aborted; no unload; A commits.
// After A's OK the consumer asks for everything again (as an application that saw its transaction end
// would) and reads for 10 s: only the fourth and fifth messages may come. Then transaction C acknowledges
// the third message cumulatively and commits: it must be refused (A consumed it). Each case reports the
// messages delivered again, C's outcome and the subscription's mark-delete position (internal stats).
//   java -cp <pulsar-client jars>:. V4PendingCumulativeAckErasedByOtherAbort --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4PendingCumulativeAckErasedByOtherAbort extends Repro {
    private static final List<String> CASES = List.of("conflict-abort-reload", "reload", "conflict-abort");
    private static final int MESSAGES = 5;
    /** The message A acknowledges cumulatively (0-based): the first three are A's. */
    private static final int ACKED = 2;

    private PulsarClient client;

    private V4PendingCumulativeAckErasedByOtherAbort(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4PendingCumulativeAckErasedByOtherAbort::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per case a topic of five messages and a Failover subscription; transaction A "
                + "acks the third cumulatively; `conflict-abort-reload`: B's cumulative ack of it is refused, B aborts, "
                + "the namespace is unloaded, A commits; `reload` and `conflict-abort` are the controls (one step "
                + "each left out); after A's OK only messages 4-5 may come again, and C's cumulative ack of the "
                + "third must be refused");
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    @Override
    void attempt(int n) {
        attemptCases(n, "fx-ea", CASES, List.of("reload", "conflict-abort"), "lost",
                (kind, namespace, topic) -> contest(kind, namespace, topic, n));
    }

    /** {"ok" | "lost" | "other", what happened}. */
    private String[] contest(String kind, String namespace, String topic, int n) throws Exception {
        try (Consumer<String> consumer = failover(client, topic, "s", 10)) {
            List<MessageId> ids = publishUnbatched(client, topic, MESSAGES, run + "/" + n);
            List<Message<String>> got = receiveEach(consumer, MESSAGES, 30);
            if (got.size() < MESSAGES) {
                return new String[] {"other", "set-up failed: received " + got.size() + " of " + MESSAGES};
            }
            MessageId third = got.get(ACKED).getMessageId();
            Transaction a = newTxn(client, 5);
            consumer.acknowledgeCumulativeAsync(third, a).get(60, TimeUnit.SECONDS);
            List<String> steps = new ArrayList<>();
            steps.add("A acked " + Repro.position(third) + " cumulatively");
            if (kind.startsWith("conflict")) {
                Transaction b = newTxn(client, 5);
                steps.add("B's ack of it " + ackOutcome(consumer, third, b));
                b.abort().get(60, TimeUnit.SECONDS);
                steps.add("B aborted");
            }
            if (kind.endsWith("reload")) {
                admin.unloadNamespace(namespace);
                steps.add("unloaded");
                Thread.sleep(3_000);
            }
            a.commit().get(60, TimeUnit.SECONDS);
            steps.add("A committed OK");
            TreeSet<Integer> again = new TreeSet<>();
            for (MessageId id : givenAgain(consumer, 10)) {
                again.add(indexOf(ids, id) + 1);
            }
            steps.add("delivered again: messages " + again + " (4-5 expected)");
            steps.add("mark-delete " + Admin.field(admin.internalStats(namespace, kind), "markDeletePosition"));
            Transaction c = newTxn(client, 5);
            String cAck = ackOutcome(consumer, third, c);
            boolean cCommitted = false;
            if (cAck.equals("accepted")) {
                c.commit().get(60, TimeUnit.SECONDS);
                cCommitted = true;
            } else {
                c.abort().get(60, TimeUnit.SECONDS);
            }
            steps.add("C's cumulative ack of " + Repro.position(third) + " " + cAck
                    + (cCommitted ? " and committed" : ""));
            boolean redelivered = again.stream().anyMatch(i -> i <= ACKED + 1);
            String what = String.join(", ", steps);
            if (redelivered || cCommitted) {
                return new String[] {"lost", what + ": A's committed ack LOST"};
            }
            return new String[] {"ok", what};
        }
    }

    /** "accepted", or "refused (the exception's class)". */
    private static String ackOutcome(Consumer<String> consumer, MessageId id, Transaction txn) throws Exception {
        try {
            consumer.acknowledgeCumulativeAsync(id, txn).get(60, TimeUnit.SECONDS);
            return "accepted";
        } catch (java.util.concurrent.ExecutionException refused) {
            return "refused (" + refused.getCause().getClass().getSimpleName() + ")";
        }
    }
}
