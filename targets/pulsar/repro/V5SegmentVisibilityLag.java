// Reproduces docs/findings/v5-segment-visibility-lag.md with Pulsar's own Java client (the v5 API
// of pulsar-client-v5) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: once a transaction's commit returns, its messages are readable (a
// subscription created afterwards from the earliest position delivers them).
//
// Per try: a scalable topic with one segment; CLIENTS threads, each with its own client, run TXNS
// transactions of MESSAGES messages each, all at once (every ABORT_EVERY-th transaction of a
// thread, counting from its second, aborts; the rest commit). Then, at each of PROBE_AT seconds
// after the load ended, a NEW durable subscription from the earliest position receives until
// QUIET_MS pass without a message, and the committed values it delivered are counted (and any
// aborted value). The bug shows when the first probe (right after the load) misses committed
// values; later probes say whether they turned up (lag) or never did (loss). On 5.0.1 with
// ZooKeeper a segment applies transaction decisions one at a time, each after a full sequential
// scan of /txn/op, so its max read position trails the commits under concurrent load.
//
//   java -cp <pulsar-client-v5 jars>:. V5SegmentVisibilityLag --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--clients 8] [--txns 20] [--messages 2]
//       [--abort-every 3] [--probe-at 0,30,60,90] [--quiet-ms 4000] [--listener external]

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5SegmentVisibilityLag extends Repro {
    /** A probe stops reading after this long even if messages keep coming (it is bounded). */
    private static final long PROBE_BOUND_MS = 45_000;
    /** The whole load (every thread) must end within this; a transaction's calls time out at 30 s. */
    private static final long LOAD_BOUND_MS = 300_000;

    private PulsarClient client;
    /** set when a try could not be judged (already reported as an error): no later try runs */
    private boolean stopped;

    private V5SegmentVisibilityLag(Cli cli) {
        super(cli, PulsarClient.class);
    }

    /** What the load did: values by how their transaction ended, as its threads saw it. */
    private static final class Load {
        final Set<String> committed = Collections.synchronizedSet(new HashSet<>());
        final Set<String> aborted = Collections.synchronizedSet(new HashSet<>());
        /** values of transactions whose send, commit or abort failed: outcome unknown, not judged */
        final Set<String> uncertain = Collections.synchronizedSet(new HashSet<>());
        final List<Long> commitMs = Collections.synchronizedList(new ArrayList<>());
        final List<String> failures = Collections.synchronizedList(new ArrayList<>());
        long elapsedMs;
    }

    /** What one probe (a fresh subscription) delivered; it subscribed `atS` seconds after the load
     *  and read until `endS` (its last message then the quiet wait): a probe that keeps receiving
     *  values as they turn visible counts them too, so its window is part of its count. */
    private record Probe(long atS, long endS, Set<String> committedSeen, Set<String> abortedSeen, int received,
                         boolean bounded) {
    }

    public static void main(String[] argv) {
        Out.run(argv, V5SegmentVisibilityLag::new);
    }

    @Override
    void setUp() throws Exception {
        client = V5Clients.of(this).client;
    }

    @Override
    void attempt(int n) throws Exception {
        stopped = stopped || !judged(n);
    }

    /** One try; false when it could not be judged (already reported as an error). */
    private boolean judged(int n) throws Exception {
        int clients = cli.integer("--clients", 8);
        int txns = cli.integer("--txns", 20);
        int messages = cli.integer("--messages", 2);
        int abortEvery = cli.integer("--abort-every", 3);
        long quietMs = cli.integer("--quiet-ms", 4000);
        List<Long> probeAt = new ArrayList<>();
        for (String at : cli.get("--probe-at", "0,30,60,90").split(",")) {
            probeAt.add(Long.parseLong(at.trim()));
        }
        String local = "vislag-" + run + "-" + n;
        String topic = "topic://public/default/" + local;
        admin.createScalableTopic(local, 1);
        out.info("try " + n + " topic", topic + " (1 segment): " + clients + " clients x " + txns + " transactions x "
                + messages + " messages, abort every " + abortEvery + " (from a thread's 2nd)");

        Load load = runLoad(n, topic, clients, txns, messages, abortEvery);
        if (load == null) {
            return false;
        }
        long loadEnd = System.nanoTime();
        List<Long> latencies = new ArrayList<>(load.commitMs);
        Collections.sort(latencies);
        out.info("try " + n + " load", load.committed.size() + " values committed, " + load.aborted.size()
                + " aborted, " + load.uncertain.size() + " of unknown outcome, in " + load.elapsedMs + " ms; commit "
                + "latency p50 " + pct(latencies, 50) + " ms, max " + pct(latencies, 100) + " ms"
                + (load.failures.isEmpty() ? "" : "; failed calls " + load.failures.size() + ", first: "
                + load.failures.get(0)));
        if (load.committed.isEmpty()) {
            out.error("try " + n + ": no transaction committed, nothing to judge", null);
            return false;
        }

        List<Probe> probes = new ArrayList<>();
        Set<String> everSeen = new HashSet<>();
        for (long at : probeAt) {
            long wait = loadEnd + TimeUnit.SECONDS.toNanos(at) - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(TimeUnit.NANOSECONDS.toMillis(wait));
            }
            long startedS = Math.round((System.nanoTime() - loadEnd) / 1e9);   // when it subscribed, to the second
            Probe probe = probe(topic, "probe-" + at, startedS, loadEnd, load, quietMs);
            probes.add(probe);
            everSeen.addAll(probe.committedSeen);
            out.info("try " + n + " probe +" + probe.atS + " s", probe.committedSeen.size() + "/"
                    + load.committed.size() + " committed values seen, " + probe.abortedSeen.size()
                    + " aborted seen, " + probe.received + " messages received, read from +" + probe.atS + " s to +"
                    + probe.endS + " s"
                    + (probe.bounded ? " (stopped at the probe's bound)" : ""));
        }

        Probe first = probes.get(0);
        Probe last = probes.get(probes.size() - 1);
        boolean shows = first.committedSeen.size() < load.committed.size();
        boolean allLast = last.committedSeen.size() == load.committed.size();
        Set<String> never = new HashSet<>(load.committed);
        never.removeAll(everSeen);
        Set<String> abortedSeen = new HashSet<>();
        List<String> counts = new ArrayList<>();
        for (Probe p : probes) {
            abortedSeen.addAll(p.abortedSeen);
            counts.add("+" + p.atS + " s (read to +" + p.endS + " s): " + p.committedSeen.size());
        }
        String after = allLast ? "the probe at +" + last.atS + " s saw all " + load.committed.size()
                + " (lag, not loss)"
                : never.isEmpty() ? "each was seen by some probe, the last saw " + last.committedSeen.size()
                : never.size() + " committed values never seen by any probe, e.g. " + sample(never);
        String summary = load.committed.size() + " values committed by " + clients + " clients x " + txns
                + " transactions in " + load.elapsedMs + " ms; committed values seen by a new subscription at "
                + String.join(", ", counts) + " of " + load.committed.size() + "; " + after + "; aborted values seen: "
                + abortedSeen.size() + (abortedSeen.isEmpty() ? "" : " e.g. " + sample(abortedSeen));
        List<String> examples = new ArrayList<>();
        if (shows) {
            Set<String> hidden = new HashSet<>(load.committed);
            hidden.removeAll(first.committedSeen);
            examples.add("right after the load (+" + first.atS + " s) a new subscription from the earliest position "
                    + "delivered " + first.committedSeen.size() + " of " + load.committed.size()
                    + " committed values, e.g. hidden: " + sample(hidden) + "; " + after);
        }
        out.attempt(n, shows, summary, examples);
        return true;
    }

    /** CLIENTS threads run their transactions at once; null when the load could not run. */
    private Load runLoad(int n, String topic, int clients, int txns, int messages, int abortEvery)
            throws Exception {
        Load load = new Load();
        List<V5Clients> connected = new ArrayList<>();
        List<Producer<String>> producers = new ArrayList<>();
        try {
            for (int c = 0; c < clients; c++) {
                // its own client per thread, as separate applications would commit; the v4 client
                // V5Clients builds beside it is not used by the load
                V5Clients own = V5Clients.connect(cli.required("--service-url"), cli.get("--listener", null),
                        Duration.ofMinutes(2));
                connected.add(own);
                producers.add(own.client.newProducer(Schema.string()).topic(topic).create());
            }
        } catch (Exception err) {
            out.error("try " + n + ": set-up of the load's clients", err);
            closeAll(connected, producers);
            return null;
        }
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            final int index = c;
            Thread thread = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException err) {
                    return;
                }
                for (int t = 0; t < txns && !Thread.currentThread().isInterrupted(); t++) {
                    transaction(load, connected.get(index).client, producers.get(index), index, t, messages,
                            abortEvery > 0 && t % abortEvery == 1);
                }
            }, "load-" + c);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
        long start = System.nanoTime();
        go.countDown();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(LOAD_BOUND_MS);
        boolean finished = true;
        for (Thread thread : threads) {
            thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            finished &= !thread.isAlive();
        }
        load.elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        if (!finished) {
            threads.forEach(Thread::interrupt);
            out.error("try " + n + ": the load did not finish within " + LOAD_BOUND_MS + " ms", null);
            return null;   // its clients are left to the JVM's exit: closing them under live threads could hang
        }
        closeAll(connected, producers);
        return load;
    }

    private void transaction(Load load, PulsarClient own, Producer<String> producer, int c, int t, int messages,
                             boolean abort) {
        List<String> values = new ArrayList<>();
        for (int m = 0; m < messages; m++) {
            values.add(run + "/c" + c + ".t" + t + ".m" + m);
        }
        Transaction txn = null;
        try {
            txn = own.newTransaction();
            for (String value : values) {
                producer.newMessage().transaction(txn).value(value).send();
            }
        } catch (Exception err) {
            load.failures.add("c" + c + ".t" + t + " open/send: " + Out.describe(err));
            load.uncertain.addAll(values);
            if (txn != null) {
                try {
                    txn.abort();
                } catch (Exception ignored) {
                    // the transaction times out (2 min) and aborts anyway; its values stay uncertain
                }
            }
            return;
        }
        long began = System.nanoTime();
        try {
            if (abort) {
                txn.abort();
                load.aborted.addAll(values);
            } else {
                txn.commit();
                load.commitMs.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began));
                load.committed.addAll(values);
            }
        } catch (Exception err) {
            load.failures.add("c" + c + ".t" + t + (abort ? " abort: " : " commit: ") + Out.describe(err));
            load.uncertain.addAll(values);
        }
    }

    /** A new durable subscription from the earliest position, read until QUIET_MS without a message
     *  (and at most PROBE_BOUND_MS); GET_LAST_MESSAGE_ID plays no part. */
    private Probe probe(String topic, String name, long atS, long loadEnd, Load load, long quietMs)
            throws Exception {
        Set<String> committed = new HashSet<>();
        Set<String> aborted = new HashSet<>();
        int received = 0;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PROBE_BOUND_MS);
        boolean bounded = false;
        try (QueueConsumer<String> consumer = client.newQueueConsumer(Schema.string()).topic(topic)
                .subscriptionName(name + "-" + UUID.randomUUID().toString().substring(0, 4))
                .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST).subscribe()) {
            while (true) {
                long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (left <= 0) {
                    bounded = true;
                    break;
                }
                Message<String> message = consumer.receive(Duration.ofMillis(Math.min(quietMs, left)));
                if (message == null) {
                    bounded = left < quietMs;
                    break;
                }
                received++;
                consumer.acknowledge(message.id());
                String value = message.value();
                if (load.committed.contains(value)) {
                    committed.add(value);
                } else if (load.aborted.contains(value)) {
                    aborted.add(value);
                }
            }
        }
        return new Probe(atS, Math.round((System.nanoTime() - loadEnd) / 1e9), committed, aborted, received, bounded);
    }

    private static void closeAll(List<V5Clients> clients, List<Producer<String>> producers) {
        for (Producer<String> producer : producers) {
            try {
                producer.close();
            } catch (Exception ignored) {
                // closing is best effort: the values are already recorded
            }
        }
        for (V5Clients c : clients) {
            try {
                c.v4.close();
            } catch (Exception ignored) {
                // as above
            }
            c.client.shutdown();
        }
    }

    private static long pct(List<Long> sorted, int p) {
        if (sorted.isEmpty()) {
            return -1;
        }
        return sorted.get(Math.max(0, Math.min(sorted.size(), (int) Math.ceil(p / 100.0 * sorted.size())) - 1));
    }

    /** A few values, sorted, so an example names real ones without listing hundreds. */
    private static String sample(Set<String> values) {
        List<String> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.subList(0, Math.min(5, sorted.size())) + (sorted.size() > 5 ? " ..." : "");
    }
}
