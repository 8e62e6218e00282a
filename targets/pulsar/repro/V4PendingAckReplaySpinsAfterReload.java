// Reproduces docs/findings/v4-pending-ack-replay-spins-after-reload.md (seen in the shipped chaos's
// new window on 3.0.0: a topic unloaded again while it loads) with Pulsar's own Java client (the v4
// API) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a subscription whose topic was unloaded can be subscribed to again once the
// topic has loaded (an unload only moves it).
//
// What it does, per try, ROUNDS rounds, each on a fresh topic of one namespace (one bundle):
//  * 8 plain messages; SUBS Failover subscriptions `ctp-0`.. (each handle's store opening is one more
//    chance at the race below); on each, FILLER transactions cumulatively ack messages 1 to 3 in turn and
//    are aborted (each subscription's pending-ack log is not empty, so every load replays it);
//    transaction B cumulatively acks message 4 on `ctp-0`; the consumers are closed;
//  * the topic is unloaded, B's commit is invoked (its END_TXN_ON_SUBSCRIPTION loads the topic again)
//    and GAP ms later the topic is unloaded again: that unload waits for the load and closes the topic
//    as it completes, while the subscriptions' pending-ack handles open their stores;
//  * then a consumer of a new client subscribes to each subscription and must be answered within WAIT s.
// The first round of a try is a control without the second unload; a try ends at its first stuck
// round (the stuck thread would hold later rounds' subscriptions too). The bug shows when a new
// client's consumer is not answered (the broker keeps its subscribe pending for ever).
// The cause found in 3.0.0's classes: the pending-ack store of the load the second unload closed is
// opened after its subscription was closed and never closed; the next load is given the same
// managed ledger and cursor by the factory, whose read position that store's replay already moved to
// the end, and `MLPendingAckStore$PendingAckReplay.run` loops (`Thread.sleep(1)`) while the log's
// last entry is past its load position and the cursor has nothing more to read: for ever, on the
// transaction executor thread every subscription pinned to it shares.
//
//   java -cp <pulsar-client jars>:. V4PendingAckReplaySpinsAfterReload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--rounds 30] [--subscriptions 8] [--filler 2]
//       [--wait 45] [--gaps 0,10,20,30,40,50,60,70,80,90,100]

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4PendingAckReplaySpinsAfterReload extends Repro {
    private static final String SUBSCRIPTION = "ctp-";
    private static final int ACKS = 3;
    private static final int MESSAGES = ACKS + 5;

    private final String namespace = "public/fx-paspin-" + run;
    private final int rounds;
    private final int filler;
    private final int subscriptions;
    private final int waitS;
    private final long[] gaps;
    private PulsarClient client;

    /** What one round saw: the second unload's gap (-1: the control) and how the subscriptions went. */
    private record Round(int r, long gap, String unload2, String commit, List<String> unanswered, long freshMs) {
        boolean stuck() {
            return unanswered.stream().anyMatch(x -> x.contains("no answer"));
        }
    }

    private V4PendingAckReplaySpinsAfterReload(Cli cli) {
        super(cli, PulsarClient.class, 8, 1);
        this.rounds = Math.max(2, cli.integer("--rounds", 30));
        this.filler = Math.max(1, cli.integer("--filler", 2));
        this.subscriptions = Math.max(1, cli.integer("--subscriptions", 8));
        this.waitS = Math.max(5, cli.integer("--wait", 45));
        this.gaps = cli.longs("--gaps", "0,10,20,30,40,50,60,70,80,90,100");
    }

    public static void main(String[] argv) {
        Out.run(argv, V4PendingAckReplaySpinsAfterReload::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries of up to " + rounds + " rounds (the first a control without the second "
                + "unload; a try ends at its first stuck round): per round a fresh topic of " + namespace + ", "
                + subscriptions + " Failover subscriptions with " + filler + " aborted transactions of " + ACKS
                + " cumulative acks each and B's cumulative ack on the first, an unload, B's commit and, GAP ms ("
                + Arrays.toString(gaps) + ") later, a second unload; then a new client's consumer of each "
                + "subscription must be answered within " + waitS + " s");
        client = namespaceAndClient(namespace);
    }

    @Override
    void attempt(int n) throws Exception {
        List<Round> seen = new ArrayList<>();
        for (int r = 1; r <= rounds; r++) {
            long gap = r == 1 ? -1 : gaps[(r - 2 + (n - 1)) % gaps.length];
            try {
                Round round = round(n, r, gap);
                seen.add(round);
                if (round.stuck()) {
                    break;   // the stuck replay holds a thread that later rounds' subscriptions may share
                }
            } catch (Exception err) {
                out.info("try " + n + " round " + r, "not judged: " + Out.trim(Out.describe(err)));
            }
        }
        List<String> examples = seen.stream().filter(x -> x.stuck() || x.gap < 0).map(x -> describe(n, x)).toList();
        long stuck = seen.stream().filter(x -> x.gap >= 0 && x.stuck()).count();
        boolean controlStuck = seen.stream().anyMatch(x -> x.gap < 0 && x.stuck());
        String summary = stuck + " of " + seen.stream().filter(x -> x.gap >= 0).count() + " rounds with a second "
                + "unload left a subscription unanswerable (a new client's consumer not answered within " + waitS
                + " s)" + (controlStuck ? "; the control (no second unload) was stuck too" : "; the control was not");
        out.attempt(n, stuck > 0, summary, examples);
    }

    private String describe(int n, Round x) {
        return "try " + n + " round " + x.r + (x.gap < 0 ? " (control)" : " (gap " + x.gap + " ms)")
                + ": B's commit " + x.commit + "; second unload " + x.unload2 + "; a new client's consumers of the "
                + subscriptions + " subscriptions, after " + x.freshMs + " ms: "
                + (x.unanswered.isEmpty() ? "all answered" : "not answered " + x.unanswered);
    }

    private Round round(int n, int r, long gap) throws Exception {
        String local = "spin-" + n + "-" + r;
        String topic = "persistent://" + namespace + "/" + local;
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < MESSAGES; i++) {
                ids.add(producer.send(run + "/" + n + "/" + r + "/" + i));
            }
        }
        Transaction b = null;
        for (int sub = 0; sub < subscriptions; sub++) {
            try (Consumer<String> consumer = subscribe(client, topic, sub).subscribe()) {
                for (int f = 0; f < filler; f++) {
                    Transaction x = newTxn(client, 5);
                    for (int a = 1; a <= ACKS; a++) {
                        consumer.acknowledgeCumulativeAsync(ids.get(a), x).get(60, TimeUnit.SECONDS);
                    }
                    x.abort().get(60, TimeUnit.SECONDS);
                }
                if (sub == 0) {
                    b = newTxn(client, 10);
                    consumer.acknowledgeCumulativeAsync(ids.get(ACKS + 1), b).get(60, TimeUnit.SECONDS);
                }
            }
        }

        // the race: an unload, B's commit (its END_TXN_ON_SUBSCRIPTION loads the topic again), the second
        // unload GAP ms later, which waits for that load and closes the topic as it completes, while each
        // subscription's pending-ack handle opens its store
        unloadOutcome(namespace, local);
        CompletableFuture<Void> commit = b.commit();
        CompletableFuture<String> second = CompletableFuture.completedFuture("none (control)");
        if (gap >= 0) {
            Out.sleep(gap);
            second = CompletableFuture.supplyAsync(() -> unloadOutcome(namespace, local));
        }
        String committed = outcome(commit, waitS);
        String unload2 = outcome(second, waitS);
        long t0 = System.nanoTime();
        List<String> unanswered = new ArrayList<>();
        try (PulsarClient other = PulsarClient.builder().serviceUrl(cli.required("--service-url"))
                .operationTimeout(waitS, TimeUnit.SECONDS).build()) {
            List<CompletableFuture<Consumer<String>>> pending = new ArrayList<>();
            for (int sub = 0; sub < subscriptions; sub++) {
                pending.add(subscribe(other, topic, sub).subscribeAsync());
            }
            for (int sub = 0; sub < subscriptions; sub++) {
                String answer = outcome(pending.get(sub), waitS);
                if (!answer.equals("ok")) {
                    unanswered.add(SUBSCRIPTION + sub + ": " + answer);
                }
                pending.get(sub).thenAccept(Consumer::closeAsync);
            }
        }
        Round round = new Round(r, gap, unload2, committed, unanswered, Out.ms(t0));
        out.info("try " + n + " round " + r, describe(n, round));
        return round;
    }

    private static org.apache.pulsar.client.api.ConsumerBuilder<String> subscribe(PulsarClient on, String topic,
                                                                                   int sub) {
        return on.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION + sub)
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest);
    }

    /** "ok" (or the unload's own answer), "failed: why" or "no answer within S s". */
    private static String outcome(CompletableFuture<?> pending, int waitS) {
        try {
            Object value = pending.get(waitS, TimeUnit.SECONDS);
            return value instanceof String text ? text : "ok";
        } catch (java.util.concurrent.TimeoutException err) {
            return "no answer within " + waitS + " s";
        } catch (Exception err) {
            Throwable cause = err.getCause() == null ? err : err.getCause();
            String text = Out.trim(Out.describe(cause));
            return text.toLowerCase().contains("timeout") ? "no answer within " + waitS + " s (" + text + ")"
                    : "failed: " + text;
        }
    }
}
