// A lead from the release matrix of 2026-12-04 (chaos.yaml; 2.10.5, 4.0.0, 4.0.8 and 5.0.1, v4), reduced.
// In each of those runs a transaction coordinator's END_TXN_ON_SUBSCRIPTION reached a subscription again
// while an earlier one of the same end was still running (the coordinator retries a request that timed
// out); the later ones failed with a NullPointerException ("this.cumulativeAckOfTransaction" is null),
// answered UnknownError, and the coordinator, which retries only timeouts, lookups and storage errors,
// logged "End transaction fail!" and answered the client's commit (or abort) with that error: the
// transaction stayed COMMITTING (ABORTING) until its coordinator was loaded again.
//
// What Pulsar promises: a participant's end of a transaction may be asked again (the coordinator retries
// an END_TXN_ON_SUBSCRIPTION whose answer did not come in time) and a repeated end changes nothing and
// succeeds, as it does for individual acknowledgements.
//
// What it does, per try: per case a one-bundle namespace, a topic of five unbatched messages, a Failover
// subscription `s`; a transaction acknowledges the third message cumulatively (individually in the control
// `individual-commit-repeated`). Then this program plays the coordinator's part with Pulsar's own client
// library (its connection to the topic's owner, `Commands.newEndTxnOnSubscription`): it sends the
// transaction's END_TXN_ON_SUBSCRIPTION to the owner --repeats times (default 5) in one write, COMMIT
// (`commit-repeated`) or ABORT (`abort-repeated`), as a coordinator's queued retries reach a subscription
// together, or once (`commit-once`, control), and reads the answers. The try shows the bug when a repeated
// end of a cumulative ack is answered with an error. Then the client ends the transaction as an application
// would, and the messages the subscription gives again are counted (a commit leaves only the fourth and
// fifth; an abort all five).
//   java -cp <pulsar-client jars>:. V4RepeatedCumulativeEndFails --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 3]
// Written by txnbench (not fetched).

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.ClientCnx;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.transaction.TransactionBufferHandler;
import org.apache.pulsar.common.api.proto.CommandEndTxnOnSubscriptionResponse;
import org.apache.pulsar.common.api.proto.TxnAction;
import org.apache.pulsar.common.protocol.Commands;

public final class V4RepeatedCumulativeEndFails extends Repro {
    private static final List<String> CASES = List.of("commit-repeated", "abort-repeated", "commit-once", "individual-commit-repeated");
    private static final int MESSAGES = 5;
    /** The message the transaction acknowledges (0-based). */
    private static final int ACKED = 2;
    /** Far above the client's own request ids, so no answer of ours is taken for one of its requests. */
    private static final AtomicLong REQUEST_IDS = new AtomicLong(1L << 40);

    /** The answers to our END_TXN_ON_SUBSCRIPTION requests, by request id: "OK" or "<error>: <message>". */
    private final Map<Long, CompletableFuture<String>> answers = new ConcurrentHashMap<>();
    /** How many times a repeated end is sent: a coordinator whose requests time out while a handle starts
     *  sends one every 4 s (3 s timeout, 1 s pause), and they queue. */
    private final int repeats;
    private PulsarClient client;

    private V4RepeatedCumulativeEndFails(Cli cli) {
        super(cli, PulsarClient.class, 8, 3);
        this.repeats = cli.integer("--repeats", 5);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4RepeatedCumulativeEndFails::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per case a topic of five messages and a Failover subscription; a "
                + "transaction acks the third (cumulatively; individually in `individual-commit-repeated`); its "
                + "END_TXN_ON_SUBSCRIPTION is sent to the owner " + repeats + " times in one write, COMMIT "
                + "(`commit-repeated`, `individual-commit-repeated`) or ABORT (`abort-repeated`), or COMMIT once "
                + "(`commit-once`), as a coordinator's queued retries reach it; shows when a repeated end of a "
                + "cumulative ack is answered with an error; then the client ends the transaction");
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    @Override
    void attempt(int n) {
        attemptCases(n, "fx-rc", CASES, List.of("commit-once", "individual-commit-repeated"), "failed",
                (kind, namespace, topic) -> contest(kind, topic, n));
    }

    /** {"ok" | "failed" | "other", what happened}. */
    private String[] contest(String kind, String topic, int n) throws Exception {
        try (Consumer<String> consumer = failover(client, topic, "s", 10)) {
            List<MessageId> ids = publishUnbatched(client, topic, MESSAGES, run + "/" + n);
            List<Message<String>> got = receiveEach(consumer, MESSAGES, 30);
            if (got.size() < MESSAGES) {
                return new String[] {"other", "set-up failed: received " + got.size() + " of " + MESSAGES};
            }
            MessageId third = got.get(ACKED).getMessageId();
            Transaction txn = newTxn(client, 5);
            if (!kind.startsWith("individual")) {
                consumer.acknowledgeCumulativeAsync(third, txn).get(60, TimeUnit.SECONDS);
            } else {
                for (int i = 0; i <= ACKED; i++) {
                    consumer.acknowledgeAsync(got.get(i).getMessageId(), txn).get(60, TimeUnit.SECONDS);
                }
            }
            List<String> steps = new ArrayList<>();
            steps.add("transaction " + txn.getTxnID() + " acked up to " + Repro.position(third)
                    + (kind.startsWith("individual") ? " individually" : " cumulatively"));
            boolean commits = !kind.startsWith("abort");
            TxnAction action = commits ? TxnAction.COMMIT : TxnAction.ABORT;
            List<String> ends = endOnSubscription(topic, txn.getTxnID(), action,
                    kind.endsWith("repeated") ? repeats : 1);
            steps.add("END_TXN_ON_SUBSCRIPTION (" + action + ") answers " + ends);
            String ended;
            try {
                (commits ? txn.commit() : txn.abort()).get(60, TimeUnit.SECONDS);
                ended = "OK";
            } catch (java.util.concurrent.ExecutionException err) {
                ended = "failed (" + Repro.rootCause(err).getClass().getSimpleName() + ")";
            }
            steps.add("the client's " + (commits ? "commit " : "abort ") + ended);
            List<Integer> again = new ArrayList<>();
            for (MessageId id : givenAgain(consumer, 5)) {
                again.add(indexOf(ids, id) + 1);
            }
            steps.add("given again: messages " + again + (commits ? " (4-5 expected)" : " (1-5 expected)"));
            boolean failed = ends.stream().anyMatch(answer -> !answer.equals("OK"));
            return new String[] {failed ? "failed" : "ok", String.join(", ", steps)};
        }
    }

    /** Sends `times` END_TXN_ON_SUBSCRIPTION (`action`) of `txn` for subscription `s` of `topic` to its owner
     *  in one write, on the client's own connection, and returns their answers in request order. */
    private List<String> endOnSubscription(String topic, TxnID txn, TxnAction action, int times) throws Exception {
        ClientCnx cnx = ((PulsarClientImpl) client).getConnection(topic).get(30, TimeUnit.SECONDS);
        cnx.registerTransactionBufferHandler(handler());
        List<Long> requests = new ArrayList<>();
        // `var`: the connection's Netty types are shaded in some releases' client and not in others.
        var channel = cnx.ctx();
        for (int i = 0; i < times; i++) {
            long requestId = REQUEST_IDS.getAndIncrement();
            requests.add(requestId);
            answers.put(requestId, new CompletableFuture<>());
            channel.write(Commands.newEndTxnOnSubscription(requestId, txn.getLeastSigBits(), txn.getMostSigBits(),
                    topic, "s", action, -1L));
        }
        channel.flush();   // the writes leave together: the broker reads them as one batch
        List<String> got = new ArrayList<>();
        for (long requestId : requests) {
            try {
                got.add(answers.get(requestId).get(30, TimeUnit.SECONDS));
            } catch (java.util.concurrent.TimeoutException silent) {
                got.add("no answer in 30 s");
            }
        }
        return got;
    }

    /** The connection hands END_TXN_ON_SUBSCRIPTION answers to a transaction-buffer handler; this one (a
     *  proxy, so it fits every release's interface) completes our requests and ignores the rest. */
    private TransactionBufferHandler handler() {
        return (TransactionBufferHandler) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {TransactionBufferHandler.class}, (proxy, method, args) -> {
                    if (method.getName().equals("handleEndTxnOnSubscriptionResponse")) {
                        long requestId = (Long) args[0];
                        CommandEndTxnOnSubscriptionResponse response = (CommandEndTxnOnSubscriptionResponse) args[1];
                        // The response is recycled after this call: its fields are read now.
                        String answer = response.hasError() ? response.getError() + ": " + response.getMessage() : "OK";
                        CompletableFuture<String> waiting = answers.get(requestId);
                        if (waiting != null) {
                            waiting.complete(answer);
                        }
                        return null;
                    }
                    if (method.getName().equals("toString")) {
                        return "txnbench end-on-subscription answers";
                    }
                    Class<?> type = method.getReturnType();
                    return type == int.class ? 0 : type == boolean.class ? false : null;
                });
    }
}
