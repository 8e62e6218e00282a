// Reproduces docs/findings/v4-commit-lost-when-pending-ack-replay-fails.md (a lead from the 5.0.1 cell of
// the release matrix) with Pulsar's own Java client (the v4 API, persistent:// topics) and the admin REST
// API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message acknowledged in a transaction whose commit returned OK is never
// delivered to that subscription again.
//
// What it does, per try, ROUNDS rounds, each on a fresh topic of one namespace (one bundle):
//  * ACKS + 10 plain messages are published (unbatched); a Failover subscription `ctp` is created;
//  * FILLER transactions each cumulatively ack messages 1..ACKS in turn (one pending-ack record each) and
//    are aborted: the subscription's pending-ack log holds FILLER * (ACKS + 1) records that every
//    load replays (aborts do not move the cursor, so the log is never trimmed);
//  * transaction B cumulatively acks message TARGET = ACKS + 5 (confirmed), and the consumer is closed;
//  * the topic is unloaded (`pulsar-admin topics unload`), B's commit is invoked (its
//    END_TXN_ON_SUBSCRIPTION loads the topic again, and the pending-ack replay starts), and GAP ms
//    later the topic is unloaded again, so that the replay is cut short while B's commit waits
//    for it; the last round of a try is a control without the second unload;
//  * then a fresh consumer on `ctp` reads what it is given, and the admin API says whether B's
//    cumulative ack is still pending on the subscription.
// The bug shows when B's commit returned OK and messages 0..TARGET are delivered again (or B still
// holds a pending cumulative ack there). The suspected cause: PendingAckHandleImpl.commitTxn has no
// `case Close` (a closed handle runs internalCommitTxn), and exceptionHandleFuture runs the queued
// requests (handleCacheRequest) against the partly replayed state; internalCommitTxn completes OK
// with no commit mark when cumulativeAckOfTransaction belongs to another transaction (a filler
// whose ACK record was replayed and its ABORT record not yet).
//
//   java -cp <pulsar-client jars>:. V4CommitLostWhenPendingAckReplayFails --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 3] [--rounds 6] [--filler 250] [--acks 20]
//       [--gaps 80,110,140,170,200,230]

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

public final class V4CommitLostWhenPendingAckReplayFails extends Repro {
    private static final String SUBSCRIPTION = "ctp";

    private final String namespace = "public/fx-palost-" + run;
    private final int rounds;
    private final int filler;
    private final int acks;
    private final long[] gaps;
    private final int target;                  // B acks messages 0..target cumulatively
    private final int msgs;
    private PulsarClient client;

    /** What one round saw. */
    private record Round(int r, long gap, String txn, String commit, long commitMs, String unload1, String unload2,
                         long unload2Ms, List<String> redelivered, String pendingOfB, String markDelete,
                         String recover, String probe, int fillerAborted) {
        boolean committed() {
            return commit.equals("ok");
        }

        boolean lost() {
            return committed() && (!redelivered.isEmpty() || pendingOfB.matches(".*\\d+:\\d+.*"));
        }
    }

    private V4CommitLostWhenPendingAckReplayFails(Cli cli) {
        super(cli, PulsarClient.class, 8, 3);
        this.rounds = Math.max(2, cli.integer("--rounds", 6));
        this.filler = cli.integer("--filler", 250);
        this.acks = Math.max(1, cli.integer("--acks", 20));
        this.target = acks + 5;
        this.msgs = target + 5;
        this.gaps = cli.longs("--gaps", "80,110,140,170,200,230");
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CommitLostWhenPendingAckReplayFails::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of " + rounds + " rounds (the last a control without the second unload); "
                + "per round a fresh topic of " + namespace + " with " + msgs + " messages, a Failover subscription, "
                + filler + " aborted transactions of " + acks + " cumulative acks each (a pending-ack log of "
                + filler * (acks + 1) + " records), transaction B's cumulative ack of message " + target
                + ", an unload, B's commit and, GAP ms (" + Arrays.toString(gaps) + ") after it, a second unload");
        client = namespaceAndClient(namespace);
    }

    @Override
    void attempt(int n) throws Exception {
        List<Round> seen = new ArrayList<>();
        for (int r = 1; r <= rounds; r++) {
            long gap = r == rounds ? -1 : gaps[(r - 1 + (n - 1)) % gaps.length];
            try {
                seen.add(round(n, r, gap));
            } catch (Exception err) {
                out.info("try " + n + " round " + r, "not judged: " + Out.trim(Out.describe(err)));
            }
        }
        List<Round> racing = seen.stream().filter(x -> x.gap >= 0).toList();
        List<Round> controls = seen.stream().filter(x -> x.gap < 0).toList();
        long lost = racing.stream().filter(Round::lost).count();
        List<String> examples = new ArrayList<>();
        for (Round round : seen) {
            if (round.lost() || (round.gap < 0 && !round.redelivered.isEmpty())) {
                examples.add(describe(n, round));
            }
        }
        Map<String, Integer> outcomes = new LinkedHashMap<>();
        for (Round round : racing) {
            outcomes.merge(round.committed() ? "ok" : Out.trim(round.commit).substring(0,
                    Math.min(80, Out.trim(round.commit).length())), 1, Integer::sum);
        }
        String summary = lost + " of " + racing.size() + " rounds with a second unload lost B's committed ack (commit "
                + "OK, messages 0.." + target + " delivered again or B's cumulative ack still pending); B's commit "
                + "outcomes " + outcomes + controls.stream().map(x -> "; control (no second unload): commit "
                + Out.trim(x.commit) + ", " + x.redelivered.size() + " delivered again, B pending "
                + x.pendingOfB).reduce("", String::concat);
        out.attempt(n, lost > 0, summary, examples);
    }

    private String describe(int n, Round x) {
        return "try " + n + " round " + x.r + " (gap " + x.gap + " ms): transaction " + x.txn + " commit " + x.commit
                + " at " + x.commitMs + " ms; unloads " + x.unload1 + " / " + x.unload2 + " (second answered at "
                + x.unload2Ms + " ms); delivered again " + x.redelivered + "; B's pending ack on the subscription "
                + x.pendingOfB + "; markDeletePosition " + x.markDelete + "; replay " + x.recover
                + "; a new transaction's cumulative ack of the next message: " + x.probe;
    }

    private Round round(int n, int r, long gap) throws Exception {
        String tag = "try " + n + " round " + r;
        String local = "ctp-" + n + "-" + r;
        String topic = "persistent://" + namespace + "/" + local;
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < msgs; i++) {
                ids.add(producer.send(run + "/" + n + "/" + r + "/" + i));
            }
        }
        Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        int aborted = 0;
        Transaction b;
        try {
            for (int f = 0; f < filler; f++) {
                Transaction x = newTxn(client, 5);
                for (int a = 1; a <= acks; a++) {
                    consumer.acknowledgeCumulativeAsync(ids.get(a), x).get(60, TimeUnit.SECONDS);
                }
                x.abort().get(60, TimeUnit.SECONDS);
                aborted++;
            }
            b = newTxn(client, 10);
            consumer.acknowledgeCumulativeAsync(ids.get(target), b).get(60, TimeUnit.SECONDS);
        } finally {
            consumer.close();
        }
        TxnID txnId = b.getTxnID();

        // the race: an unload, the commit (which loads the topic again), the second unload GAP ms later
        String unload1 = unloadOutcome(namespace, local);
        long t0 = System.nanoTime();
        CompletableFuture<Void> commit = b.commit();
        CompletableFuture<String> second;
        long[] unload2Ms = {-1};
        if (gap >= 0) {
            if (gap > 0) {
                Out.sleep(gap);
            }
            second = CompletableFuture.supplyAsync(() -> {
                String result = unloadOutcome(namespace, local);
                unload2Ms[0] = Out.ms(t0);
                return result;
            });
        } else {
            second = CompletableFuture.completedFuture("none (control)");
        }
        String commitResult;
        long commitMs;
        try {
            commit.get(90, TimeUnit.SECONDS);
            commitResult = "ok";
        } catch (Exception err) {
            Throwable cause = err.getCause() == null ? err : err.getCause();
            commitResult = cause.getClass().getSimpleName() + ": " + Out.trim(String.valueOf(cause.getMessage()));
        }
        commitMs = Out.ms(t0);
        String unload2 = second.get(120, TimeUnit.SECONDS);
        Out.sleep(2000);

        // what the subscription delivers now (its consumer loads the topic and replays the pending acks
        // in full), whether B's cumulative ack is still pending there, and whether a new transaction's
        // cumulative ack of a later message conflicts with it
        List<String> redelivered = new ArrayList<>();
        String probe;
        try (Consumer<String> fresh = client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            for (int i = 0; i < msgs * 3; i++) {
                Message<String> message = fresh.receive(5, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                String value = message.getValue();
                int index = Integer.parseInt(value.substring(value.lastIndexOf('/') + 1));
                if (index <= target) {
                    redelivered.add(index + "@" + position(message.getMessageId()));
                }
            }
            Transaction c = newTxn(client, 5);
            try {
                fresh.acknowledgeCumulativeAsync(ids.get(target + 1), c).get(60, TimeUnit.SECONDS);
                probe = "accepted";
            } catch (Exception err) {
                Throwable cause = err.getCause() == null ? err : err.getCause();
                probe = cause.getClass().getSimpleName() + ": " + Out.trim(String.valueOf(cause.getMessage()));
            }
            c.abort();
        }
        String pendingOfB = pendingOf(local, txnId);
        String recover = replayTimes(local);
        String markDelete = Admin.field(admin.internalStats(namespace, local), "markDeletePosition");
        Round round = new Round(r, gap, txnId.toString(), commitResult, commitMs, unload1, unload2, unload2Ms[0],
                redelivered, pendingOfB, markDelete, recover, probe, aborted);
        out.info(tag, "gap " + gap + " ms: commit " + commitResult + " at " + commitMs + " ms, second unload "
                + unload2 + " at " + unload2Ms[0] + " ms; delivered again " + redelivered + "; B pending "
                + pendingOfB + "; markDelete " + markDelete + " (B acked " + position(ids.get(target)) + "); replay "
                + recover + "; a new transaction's cumulative ack of message " + (target + 1) + ": " + probe);
        return round;
    }


    /** `pulsar-admin transactions transaction-in-pending-ack-stats`: B's pending cumulative ack, or why not. */
    private String pendingOf(String local, TxnID txn) {
        try {
            String json = admin.get("/admin/v3/transactions/transactionInPendingAckStats/" + namespace + "/" + local
                    + "/" + SUBSCRIPTION + "/" + txn.getMostSigBits() + "/" + txn.getLeastSigBits());
            String at = Admin.field(json, "cumulativeAckPosition");
            return at.isEmpty() ? "none" : at;
        } catch (Exception err) {
            return "? " + Out.trim(Out.describe(err));
        }
    }

    /** The pending-ack handle's state and last replay's duration (pendingAckStats). */
    private String replayTimes(String local) {
        try {
            String json = admin.get("/admin/v3/transactions/pendingAckStats/" + namespace + "/" + local + "/"
                    + SUBSCRIPTION);
            long start = number(json, "recoverStartTime");
            long end = number(json, "recoverEndTime");
            return Admin.field(json, "state") + ", " + (start > 0 && end >= start ? (end - start) + " ms" : "? ms");
        } catch (Exception err) {
            return "? " + Out.trim(Out.describe(err));
        }
    }

    private static long number(String json, String name) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"" + name + "\"\\s*:\\s*(-?\\d+)").matcher(json);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }
}
