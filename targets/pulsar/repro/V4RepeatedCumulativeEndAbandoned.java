// The coordinator's half of v4-repeated-cumulative-end-fails, on demand: a commit or abort whose
// END_TXN_ON_SUBSCRIPTION waits at a subscription whose pending-ack handle is still replaying its log, so
// that the coordinator's retries (one every 4 s: a 3 s request timeout, a 1 s pause) queue behind the first
// and run together once the replay ends. Pulsar's own Java client (the v4 API) and the admin REST API only.
// Written by txnbench (not fetched).
//
// What Pulsar promises: a commit or abort the coordinator has logged is carried out on every participant,
// the client is told its outcome, and the transaction ends; what fails for a while is retried.
//
// What it does, per try: per case a one-bundle namespace, a topic of 5 + BULK unbatched messages and a
// Failover subscription `c`. Transaction A acknowledges the third message cumulatively; ten other
// transactions, left open, acknowledge the BULK messages after the fifth individually, so the
// subscription's pending-ack log holds BULK records (`--bulk`, default 3000; 0 in the control
// `abort-after-short-replay`). The namespace is unloaded; every broker's link to the bookie is delayed
// (`slow-ledger`, LATENCY ms each way for SLOW s) so the next load replays that log slowly; A's end is
// invoked at once: abort (`abort-after-long-replay`, the control) or commit (`commit-after-long-replay`).
// Once the end has answered and the delay is over, the coordinator is asked for A's status twice,
// SETTLE s apart. A case shows the bug when A's end failed and A is COMMITTING or ABORTING at both
// readings.
//   java -cp <pulsar-client jars>:. V4RepeatedCumulativeEndAbandoned --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--bulk 3000] [--latency-ms 150] [--slow-s 40]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

public final class V4RepeatedCumulativeEndAbandoned extends Repro {
    private static final List<String> CASES = List.of("abort-after-long-replay", "commit-after-long-replay",
            "abort-after-short-replay");
    private static final int HEAD = 5;
    /** The message A acknowledges cumulatively (0-based). */
    private static final int ACKED = 2;
    private static final int HOLDERS = 10;
    private static final int SETTLE_S = 10;

    private final int bulk;
    private final int latencyMs;
    private final int slowS;
    private PulsarClient client;

    private V4RepeatedCumulativeEndAbandoned(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
        this.bulk = cli.integer("--bulk", 3000);
        this.latencyMs = cli.integer("--latency-ms", 150);
        this.slowS = cli.integer("--slow-s", 40);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4RepeatedCumulativeEndAbandoned::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per case a topic of 5 + " + bulk + " messages and a Failover subscription; "
                + "transaction A acks the third cumulatively, ten open transactions ack the " + bulk + " others "
                + "individually (none in `abort-after-short-replay`); the namespace is unloaded, the brokers' link "
                + "to the bookie delayed " + latencyMs + " ms each way for " + slowS + " s, and A's end invoked at "
                + "once; shows when A's end failed and the coordinator holds A COMMITTING or ABORTING " + SETTLE_S
                + " s apart after the delay");
        client = setUp("client", () -> v4Client(true, 90, true));
    }

    @Override
    void attempt(int n) {
        attemptCases(n, "fx-ra", CASES, List.of("abort-after-short-replay"), "abandoned",
                (kind, namespace, topic) -> contest(kind, namespace, topic, n));
    }

    /** {"abandoned" | "ok" | "other", what happened}. */
    private String[] contest(String kind, String namespace, String topic, int n) throws Exception {
        int others = kind.contains("short") ? 0 : bulk;
        List<String> steps = new ArrayList<>();
        List<Transaction> holders = new ArrayList<>();
        Transaction a;
        try (Consumer<String> consumer = failover(client, topic, "c", 1000)) {
            publishUnbatched(client, topic, HEAD + others, run + "/" + n);
            List<MessageId> got = new ArrayList<>();
            for (Message<String> message : receiveEach(consumer, HEAD + others, 30)) {
                got.add(message.getMessageId());
            }
            if (got.size() < HEAD + others) {
                return new String[] {"other", "set-up failed: received " + got.size() + " of " + (HEAD + others)};
            }
            a = newTxn(client, 10);
            consumer.acknowledgeCumulativeAsync(got.get(ACKED), a).get(60, TimeUnit.SECONDS);
            for (int i = 0; i < (others == 0 ? 0 : HOLDERS); i++) {
                holders.add(newTxn(client, 10));
            }
            List<CompletableFuture<Void>> acks = new ArrayList<>();
            for (int i = HEAD; i < HEAD + others; i++) {
                acks.add(consumer.acknowledgeAsync(got.get(i), holders.get(i % HOLDERS)));
                if (acks.size() == 200) {
                    CompletableFuture.allOf(acks.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
                    acks.clear();
                }
            }
            CompletableFuture.allOf(acks.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
            steps.add(a.getTxnID() + " acked " + Repro.position(got.get(ACKED)) + " cumulatively, " + others
                    + " individual acks pending in " + holders.size() + " open transactions");
        }
        admin.unloadNamespace(namespace);
        boolean slowed = out.ask("slow-ledger:" + latencyMs + "," + slowS, cli.required("--admin-url"),
                "delay every broker's link to the bookie " + latencyMs + " ms each way now, for " + slowS
                        + " s; answer `done` at once");
        long slowEnds = System.nanoTime() + TimeUnit.SECONDS.toNanos(slowS);
        if (!slowed) {
            return new String[] {"other", String.join(", ", steps) + "; the ledger link was not slowed"};
        }
        String ended;
        long started = System.nanoTime();
        boolean commits = kind.startsWith("commit");
        TxnID id = a.getTxnID();
        try {
            (commits ? a.commit() : a.abort()).get(120, TimeUnit.SECONDS);
            ended = "OK";
        } catch (java.util.concurrent.ExecutionException err) {
            ended = "failed (" + Out.trim(String.valueOf(Repro.rootCause(err))) + ")";
        }
        long endedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        steps.add("unloaded, ledger slowed, A's " + (commits ? "commit " : "abort ") + ended + " after " + endedMs
                + " ms");
        sleepUntil(Math.max(System.nanoTime(), slowEnds) + TimeUnit.SECONDS.toNanos(2));
        String first = Out.trim(admin.transactionMetadata(id.getMostSigBits(), id.getLeastSigBits()));
        Thread.sleep(SETTLE_S * 1000L);
        String second = Out.trim(admin.transactionMetadata(id.getMostSigBits(), id.getLeastSigBits()));
        steps.add("coordinator: " + first + " then " + second);
        for (Transaction holder : holders) {
            holder.abort().get(120, TimeUnit.SECONDS);
        }
        boolean stuck = TxnState.unfinished(first) && TxnState.unfinished(second);
        boolean failed = !ended.equals("OK");
        return new String[] {failed && stuck ? "abandoned" : failed || stuck ? "other" : "ok",
            String.join(", ", steps) + (failed && stuck ? ": A's end ABANDONED" : "")};
    }
}
