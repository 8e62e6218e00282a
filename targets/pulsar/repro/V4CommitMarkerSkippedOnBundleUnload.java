// Reproduces docs/findings/v4-commit-marker-skipped-on-bundle-unload.md with Pulsar's own Java
// client (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a transaction whose commit the coordinator answered OK is committed on
// every partition it wrote to, so every one of its messages is delivered.
//
// What it does, per try, on two brokers:
//  * two namespaces of one bundle each: MOVING (a partitioned topic A, plus BALLAST plain topics
//    with a producer each, so that closing the bundle's topics takes a while) and STEADY (topic B);
//  * WORKERS threads commit transactions back to back, each one message to a partition of A
//    (round robin) and one to B;
//  * after LOAD_MS the bundle of MOVING is unloaded (`pulsar-admin namespaces unload`), or, with
//    `--fault restart`, its owner broker is restarted gracefully (asked of whoever runs this,
//    see Out.ask); the load goes on for AFTER_MS, then stops;
//  * a few more transactions write to every partition (they move each coordinator's low
//    watermark past everything before them), then fresh readers read A's partitions and B from
//    the start until `hasMessageAvailable()` is false.
// The bug shows when a transaction whose commit returned OK has a message missing. While the
// bundle is being unloaded its ownership node is marked disabled, a lookup of its topics fails
// with MetadataError, and TransactionBufferHandlerImpl.endTxn counts that partition as done
// (BrokerMetadataException -> op.cb.complete(null)): no commit marker; the next owner later
// aborts the transaction by low watermark, or holds every later message behind it.
//
//   java -cp <pulsar-client jars>:. V4CommitMarkerSkippedOnBundleUnload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 5] [--workers 8] [--fault unload|restart]

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

public final class V4CommitMarkerSkippedOnBundleUnload extends Repro {
    private static final String TENANT = "public";

    private final String moving = TENANT + "/fx-moving-" + run;
    private final String steady = TENANT + "/fx-steady-" + run;
    private final int workers;
    private final int partitions;
    private final long loadMs;
    private final long afterMs;
    private final String fault;
    private PulsarClient client;

    /** One transaction of the load: where its two messages went and what its commit returned. */
    private record Txn(int k, TxnID id, int partition, String a, String b, String commit, long commitStartMs,
                       long commitEndMs) {
        boolean ok() {
            return commit.equals("ok");
        }
    }

    private V4CommitMarkerSkippedOnBundleUnload(Cli cli) {
        super(cli, PulsarClient.class, 8, 5);
        this.workers = cli.integer("--workers", 8);
        this.partitions = cli.integer("--partitions", 4);
        this.loadMs = cli.integer("--load-ms", 1500);
        this.afterMs = cli.integer("--after-ms", 2000);
        this.fault = cli.get("--fault", "unload");
    }

    public static void main(String[] argv) {
        Out.run(argv, V4CommitMarkerSkippedOnBundleUnload::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; " + workers + " workers commit transactions (1 message to a partition of "
                + partitions + " of persistent://" + moving + "/a-<try>, 1 to persistent://" + steady
                + "/b-<try>); after " + loadMs + " ms: " + ("restart".equals(fault)
                ? "graceful restart of the broker owning " + moving : "unload of namespace " + moving));
        client = setUp("namespaces, client", () -> {
            admin.createNamespace(moving, 1);
            admin.createNamespace(steady, 1);
            return v4Client(true, 30, true);
        });
        int count = cli.integer("--ballast", 16);
        for (int i = 0; i < count; i++) {   // loaded topics in the moving bundle: its unload closes each
            Producer<String> p = client.newProducer(Schema.STRING).topic("persistent://" + moving + "/ballast-" + i)
                    .enableBatching(false).create();
            atEnd(p::closeAsync);
            p.send("ballast");
        }
        out.info("ballast", count + " topics with a producer in " + moving);
    }

    @Override
    void attempt(int n) throws Exception {
        String a = "a-" + n;
        String b = "b-" + n;
        admin.createPartitionedTopic(moving, a, partitions);
        List<Producer<String>> producersA = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            producersA.add(producer("persistent://" + moving + "/" + a + "-partition-" + p));
        }
        Producer<String> producerB = producer("persistent://" + steady + "/" + b);
        String owner = admin.ownerHttpUrl(moving, a + "-partition-0");
        out.info("try " + n + " owner of " + moving, owner);

        ConcurrentLinkedQueue<Txn> done = new ConcurrentLinkedQueue<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger counter = new AtomicInteger();
        long t0 = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            Thread thread = new Thread(() -> load(n, producersA, producerB, stop, counter, done, t0), "load-" + w);
            thread.start();
            threads.add(thread);
        }
        Thread.sleep(loadMs);
        long faultStart = Out.ms(t0);
        String faultResult;
        if ("restart".equals(fault)) {
            faultResult = out.ask("restart-broker", owner, "restart the broker serving " + owner
                    + " gracefully (SIGTERM, wait until it is gone, start it again), then answer `done`")
                    ? "restarted" : "not restarted";
        } else {
            try {
                admin.unloadNamespace(moving);
                faultResult = "unloaded";
            } catch (Exception err) {
                faultResult = "unload failed: " + Out.describe(err);
            }
        }
        long faultEnd = Out.ms(t0);
        Thread.sleep(afterMs);
        stop.set(true);
        for (Thread thread : threads) {
            thread.join(120_000);
        }
        List<Txn> txns = new ArrayList<>(done);
        txns.sort((x, y) -> Integer.compare(x.k, y.k));

        // move every coordinator's low watermark past the load: a few transactions on every partition
        List<String> flush = new ArrayList<>();
        for (int f = 0; f < 8; f++) {
            try {
                Transaction txn = newTxn(client, 2);
                List<CompletableFuture<MessageId>> sends = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    String value = run + "/" + n + "/flush-" + f + "/" + p;
                    sends.add(producersA.get(p).newMessage(txn).value(value).sendAsync());
                    flush.add(value);
                }
                String value = run + "/" + n + "/flush-" + f + "/b";
                sends.add(producerB.newMessage(txn).value(value).sendAsync());
                flush.add(value);
                CompletableFuture.allOf(sends.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
                txn.commit().get(60, TimeUnit.SECONDS);
            } catch (Exception err) {
                out.info("try " + n + " flush transaction " + f, Out.describe(err));
            }
        }
        for (Producer<String> p : producersA) {
            p.closeAsync();
        }
        producerB.closeAsync();
        Thread.sleep(1000);

        Map<Integer, Set<String>> readA = new TreeMap<>();
        for (int p = 0; p < partitions; p++) {
            readA.put(p, readAll("persistent://" + moving + "/" + a + "-partition-" + p));
        }
        Set<String> readB = readAll("persistent://" + steady + "/" + b);
        List<Txn> missing = missing(txns, readA, readB);
        if (!missing.isEmpty()) {   // not a late read: read again after a pause
            Thread.sleep(5000);
            for (int p = 0; p < partitions; p++) {
                readA.put(p, readAll("persistent://" + moving + "/" + a + "-partition-" + p));
            }
            readB = readAll("persistent://" + steady + "/" + b);
            missing = missing(txns, readA, readB);
        }
        Set<String> everything = new HashSet<>(readB);
        readA.values().forEach(everything::addAll);
        List<String> heldPartitions = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            if (!readA.get(p).contains(run + "/" + n + "/flush-7/" + p)) {
                heldPartitions.add(a + "-partition-" + p);
            }
        }

        Map<String, Integer> outcomes = new TreeMap<>();
        for (Txn t : txns) {
            outcomes.merge(t.commit.length() > 120 ? t.commit.substring(0, 120) : t.commit, 1, Integer::sum);
        }
        int ok = (int) txns.stream().filter(Txn::ok).count();
        List<String> examples = new ArrayList<>();
        for (Txn t : missing.subList(0, Math.min(3, missing.size()))) {
            String partition = a + "-partition-" + t.partition;
            boolean aRead = everything.contains(t.a);
            boolean bRead = everything.contains(t.b);
            examples.add("txn " + t.id + " commit OK at " + t.commitEndMs + " ms (invoked " + t.commitStartMs
                    + " ms; fault " + faultStart + "-" + faultEnd + " ms): " + partition + " "
                    + (aRead ? "delivered" : "MISSING") + ", " + b + " " + (bRead ? "delivered" : "MISSING")
                    + "; coordinator: " + Out.trim(admin.transactionMetadata(t.id.getMostSigBits(),
                    t.id.getLeastSigBits())) + "; " + partition + "'s buffer: "
                    + Out.trim(admin.transactionInBuffer(moving, partition, t.id.getMostSigBits(),
                    t.id.getLeastSigBits())));
        }
        String summary = txns.size() + " transactions, commits " + outcomes + "; fault " + faultResult + " at "
                + faultStart + "-" + faultEnd + " ms; " + missing.size() + " of " + ok
                + " committed (OK) transactions have a message missing"
                + (heldPartitions.isEmpty() ? "" : "; partitions holding back later commits: " + heldPartitions);
        out.attempt(n, !missing.isEmpty(), summary, examples);
    }

    private void load(int n, List<Producer<String>> producersA, Producer<String> producerB, AtomicBoolean stop,
                      AtomicInteger counter, ConcurrentLinkedQueue<Txn> done, long t0) {
        while (!stop.get()) {
            int k = counter.getAndIncrement();
            int partition = k % producersA.size();
            String a = run + "/" + n + "/" + k + "/a";
            String b = run + "/" + n + "/" + k + "/b";
            Transaction txn;
            try {
                txn = newTxn(client, 2);
            } catch (Exception err) {
                Out.sleep(100);
                continue;
            }
            try {
                CompletableFuture<MessageId> sendA = producersA.get(partition).newMessage(txn).value(a).sendAsync();
                CompletableFuture<MessageId> sendB = producerB.newMessage(txn).value(b).sendAsync();
                CompletableFuture.allOf(sendA, sendB).get(60, TimeUnit.SECONDS);
            } catch (Exception err) {
                txn.abort();
                continue;
            }
            long started = Out.ms(t0);
            String result;
            try {
                txn.commit().get(90, TimeUnit.SECONDS);
                result = "ok";
            } catch (Exception err) {
                Throwable cause = err.getCause() == null ? err : err.getCause();
                result = cause.getClass().getSimpleName() + ": " + cause.getMessage();
            }
            done.add(new Txn(k, txn.getTxnID(), partition, a, b, result, started, Out.ms(t0)));
        }
    }

    private static List<Txn> missing(List<Txn> txns, Map<Integer, Set<String>> readA, Set<String> readB) {
        List<Txn> out = new ArrayList<>();
        for (Txn t : txns) {
            if (t.ok() && (!readA.get(t.partition).contains(t.a) || !readB.contains(t.b))) {
                out.add(t);
            }
        }
        return out;
    }

    private Producer<String> producer(String topic) throws Exception {
        return client.newProducer(Schema.STRING).topic(topic).enableBatching(false).sendTimeout(60, TimeUnit.SECONDS)
                .create();
    }

    /** Every value of `topic` from its start up to what the broker says is the last readable message. */
    private Set<String> readAll(String topic) throws Exception {
        Set<String> values = new HashSet<>();
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic).startMessageId(MessageId.earliest)
                .create()) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline && reader.hasMessageAvailable()) {
                Message<String> message = reader.readNext(5, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                values.add(message.getValue());
            }
        }
        return values;
    }
}
