// Reproduces docs/findings/v5-chaos-aborted-read.md with Pulsar's own Java client: the v5 API
// (pulsar-client-v5) writes, aborts, commits and subscribes; the client's v4 layer
// (PulsarClientImpl's segment methods, which the v5 client itself uses) finds the segment's broker
// and reads the segment with fresh Readers. Written by txnbench (not fetched).
//
// What Pulsar promises: a reader (READ_COMMITTED, the only isolation v5 has) is never given a
// message of an aborted transaction, however the segment was loaded.
//
// The cause tested (5.0.1, MetadataTransactionBuffer): the constructor sets the max read position
// to the ledger's last entry, then recover() loads the watermark and, on ZooKeeper by listing every
// child of /txn/segment-state/aborted and getting them one after another, the aborted set.
// getMaxReadPosition has no readiness check and isTxnAborted looks only at the set being filled;
// only GET_LAST_MESSAGE_ID waits for the recovery, dispatch does not. So a reader that subscribes
// while a freshly loaded segment recovers may be given aborted messages (v4's TopicTransactionBuffer
// answers EARLIEST until it is ready).
//
// Per try: a scalable topic with one segment; ABORTED transactions of one message each, a committed
// one after every COMMIT_EVERY of them and one last (so every aborted record is durable before
// the restart: a segment applies decisions one after another). A durable subscription opened before
// them must receive every committed value and no aborted one while the segment stays loaded, and a
// fresh Reader from the earliest position (the control) must read no aborted value. The producer and
// every consumer are closed, the segment's broker (or every broker: --restart all) is restarted
// (asked of whoever runs this, see Out.ask), and at once a fresh Reader from the earliest position
// loads the segment again (racing its recovery) and reads until QUIET_MS pass without a message;
// LATER_S after the restart another fresh Reader does the same (a race shows only early; a lost
// aborted set shows in both). The bug shows when a Reader is given a value of an aborted
// transaction; a try whose readers were not given every committed value is not judged (an error
// line). public/default gets infinite retention, as txnbench's set-up gives its namespaces: without
// it the restart trims the ledger the live subscription read to its end, and nothing is left to read.
//
//   java -cp <pulsar-client-v5 jars>:. V5AbortedReadAfterRestart --service-url pulsar://h:1,h:2
//       --admin-url http://<broker>:8080 [--tries 1] [--aborted 200] [--commit-every 2]
//       [--restart owner|all] [--later-s 30] [--quiet-ms 5000] [--listener external]

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5AbortedReadAfterRestart extends Repro {
    /** How long the live subscription may take to see every committed value (ZooKeeper's apply lag). */
    private static final long LIVE_BUDGET_MS = 180_000;
    /** How long one Reader may read at most, however often messages keep coming. */
    private static final long READ_BUDGET_MS = 120_000;

    private V5Clients clients;
    private PulsarClient client;

    private V5AbortedReadAfterRestart(Cli cli) {
        super(cli, PulsarClient.class);
    }

    /** What one Reader was given: values in order, with their ids and ms after `since`. */
    private record Read(String name, List<String> values, List<String> ids, List<Long> atMs, long subscribeMs,
                        String problem) {
        List<String> of(Set<String> wanted) {
            List<String> hits = new ArrayList<>();
            for (String value : values) {
                if (wanted.contains(value)) {
                    hits.add(value);
                }
            }
            return hits;
        }

        /** The first `limit` aborted values as `value@id +ms`. */
        List<String> examples(Set<String> aborted, int limit) {
            List<String> shown = new ArrayList<>();
            for (int i = 0; i < values.size() && shown.size() < limit; i++) {
                if (aborted.contains(values.get(i))) {
                    shown.add(values.get(i) + "@" + ids.get(i) + " +" + atMs.get(i) + "ms");
                }
            }
            return shown;
        }

        long lastAbortedMs(Set<String> aborted) {
            long last = -1;
            for (int i = 0; i < values.size(); i++) {
                if (aborted.contains(values.get(i))) {
                    last = atMs.get(i);
                }
            }
            return last;
        }

        String describe(Set<String> aborted, Set<String> committed) {
            int bad = of(aborted).size();
            String text = name + ": " + bad + " aborted (of " + aborted.size() + "), " + of(committed).size()
                    + " of " + committed.size() + " committed, " + values.size() + " in all";
            if (bad > 0) {
                text += ", the last aborted at +" + lastAbortedMs(aborted) + " ms";
            }
            text += ", subscribed at +" + subscribeMs + " ms";
            return problem.isEmpty() ? text : text + " (" + problem + ")";
        }
    }

    public static void main(String[] argv) {
        Out.run(argv, V5AbortedReadAfterRestart::new);
    }

    @Override
    void setUp() throws Exception {
        clients = V5Clients.of(this);
        client = clients.client;
        // without retention the segment's ledger, read to its end by the live subscription, is
        // trimmed when the restart rolls it (and the aborted records with it): nothing to read
        keepEverythingOnDefault();
    }

    @Override
    void attempt(int n) throws Exception {
        int aborts = cli.integer("--aborted", 200);
        int commitEvery = Math.max(1, cli.integer("--commit-every", 2));
        String mode = cli.get("--restart", "owner");
        long laterMs = cli.integer("--later-s", 30) * 1000L;
        String local = "abrd-" + run + "-" + n;
        String topic = "topic://public/default/" + local;
        admin.createScalableTopic(local, 1);
        String segment = admin.firstSegment(local);
        out.info("try " + n + " segment", segment);

        Set<String> aborted = new LinkedHashSet<>();
        Set<String> committed = new LinkedHashSet<>();
        List<String> live = new ArrayList<>();
        long wrote;
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic).create();
             QueueConsumer<String> subscription = client.newQueueConsumer(Schema.string()).topic(topic)
                     .subscriptionName("live").subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                     .subscribe()) {
            long started = System.nanoTime();
            for (int i = 0; i < aborts; i++) {
                Transaction txn = client.newTransaction();
                String value = run + "/" + n + "/a" + i;
                producer.newMessage().transaction(txn).value(value).send();
                txn.abort();
                aborted.add(value);
                if ((i + 1) % commitEvery == 0 || i == aborts - 1) {
                    clients.commitOne(producer, run + "/" + n + "/c" + i, committed);
                }
            }
            wrote = (System.nanoTime() - started) / 1_000_000;
            out.info("try " + n + " written", aborted.size() + " aborted and " + committed.size()
                    + " committed transactions (one message each) in " + wrote + " ms");
            // bounded: every committed value, or LIVE_BUDGET_MS, then nothing more for 2 s
            long deadline = System.currentTimeMillis() + LIVE_BUDGET_MS;
            while (System.currentTimeMillis() < deadline) {
                boolean all = live.containsAll(committed);
                Message<String> message = subscription.receive(Duration.ofMillis(all ? 2_000 : 5_000));
                if (message == null) {
                    if (all) {
                        break;
                    }
                    continue;
                }
                live.add(message.value());
                subscription.acknowledge(message.id());
            }
        }
        List<String> liveAborted = new ArrayList<>(live);
        liveAborted.retainAll(aborted);
        boolean liveComplete = live.containsAll(committed);
        out.info("try " + n + " live subscription", live.size() + " received: " + liveAborted.size()
                + " aborted, every committed value " + (liveComplete ? "yes" : "NO"));
        Read control = read("control (loaded segment)", segment, System.nanoTime(), committed);
        out.info("try " + n + " " + control.name, control.describe(aborted, committed));

        String owner = clients.owner(segment);
        List<String> victims = mode.equals("all") ? serviceBrokers(cli.required("--service-url")) : List.of(owner);
        out.info("try " + n + " owner", owner);
        boolean restarted = true;
        for (String broker : victims) {
            restarted &= out.ask("restart-broker", broker, "stop the broker serving " + broker
                    + " (SIGTERM), start it again and wait until it is ready, then answer `done`");
        }
        long since = System.nanoTime();
        if (!restarted) {
            out.error("try " + n + ": the broker restart was not done", null);
            return;
        }
        Read early = read("reader at once", segment, since, committed);
        long wait = laterMs - (System.nanoTime() - since) / 1_000_000;
        if (wait > 0) {
            Thread.sleep(wait);
        }
        Read later = read("reader later", segment, since, committed);

        List<String> parts = new ArrayList<>();
        parts.add(aborted.size() + " aborted, " + committed.size() + " committed (written in " + wrote + " ms)");
        parts.add("live subscription: " + liveAborted.size() + " aborted, every committed value "
                + (liveComplete ? "yes" : "NO"));
        parts.add(control.describe(aborted, committed));
        parts.add("restart " + String.join(" and ", victims));
        List<String> examples = new ArrayList<>();
        boolean shows = !liveAborted.isEmpty();
        if (!liveAborted.isEmpty()) {
            examples.add("the live subscription was given aborted values " + first(liveAborted, 5));
        }
        for (Read r : List.of(control, early, later)) {
            if (r != control) {
                parts.add(r.describe(aborted, committed));
            }
            if (!r.of(aborted).isEmpty()) {
                shows = true;
                examples.add(r.name + " on " + segment + " was given " + r.of(aborted).size()
                        + " values of aborted transactions, first " + r.examples(aborted, 5)
                        + " (ms after the restart's answer)");
            }
        }
        // a reader that was not given the committed values cannot say the aborted ones were withheld
        boolean judged = shows || (liveComplete && early.of(committed).size() == committed.size()
                && later.of(committed).size() == committed.size());
        if (!judged) {
            out.error("try " + n + " not judged: a subscription or reader was not given every committed value: "
                    + String.join("; ", parts), null);
            return;
        }
        out.attempt(n, shows, String.join("; ", parts), examples);
    }

    /** A fresh Reader of `segment` from its first message, read until QUIET_MS without a message
     *  (the first wait is longer: the segment may be loading), at most READ_BUDGET_MS or as many
     *  messages as could be there twice over. Times are ms after `since` (System.nanoTime). */
    private Read read(String name, String segment, long since, Set<String> committed) {
        long quiet = cli.integer("--quiet-ms", 5000);
        int limit = 2 * (cli.integer("--aborted", 200) + committed.size()) + 10;
        List<String> values = new ArrayList<>();
        List<String> ids = new ArrayList<>();
        List<Long> at = new ArrayList<>();
        long subscribed = -1;
        String problem = "";
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READ_BUDGET_MS);
        try (org.apache.pulsar.client.api.Reader<String> reader = clients.segmentReader(segment, 60)) {
            subscribed = (System.nanoTime() - since) / 1_000_000;
            while (values.size() < limit && System.nanoTime() < deadline) {
                long waitMs = values.isEmpty() ? Math.max(quiet, 15_000) : quiet;
                org.apache.pulsar.client.api.Message<String> message = reader.readNext((int) waitMs,
                        TimeUnit.MILLISECONDS);
                if (message == null) {
                    break;
                }
                values.add(message.getValue());
                ids.add(String.valueOf(message.getMessageId()));
                at.add((System.nanoTime() - since) / 1_000_000);
            }
            if (System.nanoTime() >= deadline) {
                problem = "stopped at the read budget of " + READ_BUDGET_MS + " ms";
            }
        } catch (Exception err) {
            problem = "the reader failed: " + Out.describe(err);
        }
        return new Read(name, values, ids, at, subscribed, problem);
    }

    private static List<String> first(List<String> values, int limit) {
        return values.subList(0, Math.min(limit, values.size()));
    }
}
