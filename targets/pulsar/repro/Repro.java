// What every finding program shares: its output, command line, admin API and run id; the `client`
// line, the set-up, try 1 to --tries and the closing of what it opened (`runAll`); the v4 client
// and the v4 steps several programs take. A program keeps only its own steps and observations.
// Written by txnbench (not fetched).

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.impl.MessageIdImpl;

abstract class Repro implements Out.Program {
    final Out out = new Out();
    final Cli cli;
    final Admin admin;
    final String run;
    final int tries;
    private final Class<?> api;
    private final Deque<AutoCloseable> opened = new ArrayDeque<>();

    /** `api`: the client class whose release the `client` line names. */
    Repro(Cli cli, Class<?> api) {
        this(cli, api, 6, 1);
    }

    Repro(Cli cli, Class<?> api, int runChars, int defaultTries) {
        this.cli = cli;
        this.api = api;
        this.admin = new Admin(cli.required("--admin-url"));
        this.run = UUID.randomUUID().toString().substring(0, runChars);
        this.tries = cli.integer("--tries", defaultTries);
    }

    /** A set-up step that failed: an error line `set-up (<what>)`, and no try runs. */
    static final class SetUpFailed extends Exception {
        SetUpFailed(String what, Throwable cause) {
            super(what, cause);
        }
    }

    /** What the tries share (clients, namespaces); `setUp(what, step)` names a step that may fail. */
    abstract void setUp() throws Exception;

    abstract void attempt(int n) throws Exception;

    @Override
    public final Out out() {
        return out;
    }

    @Override
    public final void runAll() throws Exception {
        out.info("client", "Pulsar Java client " + api.getPackage().getImplementationVersion());
        try {
            setUp();
            for (int n = 1; n <= tries; n++) {
                attempt(n);
            }
        } catch (SetUpFailed failed) {
            out.error("set-up (" + failed.getMessage() + ")", failed.getCause());
        } finally {
            while (!opened.isEmpty()) {
                opened.pop().close();
            }
        }
    }

    /** `step`'s value; its failure is SetUpFailed. */
    static <T> T setUp(String what, Callable<T> step) throws SetUpFailed {
        try {
            return step.call();
        } catch (Exception err) {
            throw new SetUpFailed(what, err);
        }
    }

    /** Asks for `broker` (a service URL) to be cut from the metadata store now and the cut mended `seconds`
     *  later; whether it was. */
    boolean cutFromMetadata(String broker, int seconds) {
        return out.ask("cut-metadata:" + seconds, broker, "cut the broker serving " + broker + " from the metadata "
                + "store now and mend the cut " + seconds + " s later; answer `done` at once");
    }

    /** Closed when the program ends, the last one given first. */
    <T extends AutoCloseable> T atEnd(T closing) {
        opened.push(closing);
        return closing;
    }

    /** Pulsar's v4 client on --service-url, through --listener when `viaListener` and one is named;
     *  closed at the end. */
    PulsarClient v4Client(boolean transactions, int timeoutS, boolean viaListener) throws Exception {
        return atEnd(v4Builder(cli.required("--service-url"), transactions, timeoutS, viaListener).build());
    }

    /** Pulsar's v4 client builder on `serviceUrl` (one broker, or --service-url), through --listener
     *  when `viaListener` and one is named; the caller builds and closes it. */
    ClientBuilder v4Builder(String serviceUrl, boolean transactions, int timeoutS, boolean viaListener) {
        ClientBuilder builder = PulsarClient.builder().serviceUrl(serviceUrl)
                .enableTransaction(transactions).operationTimeout(timeoutS, TimeUnit.SECONDS);
        String listener = cli.get("--listener", null);
        if (viaListener && listener != null) {
            builder.listenerName(listener);
        }
        return builder;
    }

    /** The set-up of a program whose tries share one namespace: `namespace` (one bundle, every message
     *  kept) and the v4 client with transactions; a failure is SetUpFailed. */
    PulsarClient namespaceAndClient(String namespace) throws SetUpFailed {
        return setUp("namespace, client", () -> {
            admin.createNamespace(namespace, 1);
            return v4Client(true, 30, true);
        });
    }

    static Transaction newTxn(PulsarClient client, int minutes) throws Exception {
        return client.newTransaction().withTransactionTimeout(minutes, TimeUnit.MINUTES).build()
                .get(60, TimeUnit.SECONDS);
    }

    /** Transactions that each sent one message, and their values in the same order. */
    record OneMessageEach(List<Transaction> txns, List<String> values) {
    }

    /** `count` transactions (timeout `minutes`) that each send the value `<prefix>/<i>` with `producer`;
     *  returned once every send is acknowledged. */
    static OneMessageEach oneMessageEach(PulsarClient client, Producer<String> producer, int count, int minutes,
                                         String prefix) throws Exception {
        List<Transaction> txns = new ArrayList<>();
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        List<String> values = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Transaction txn = newTxn(client, minutes);
            String value = prefix + "/" + i;
            txns.add(txn);
            values.add(value);
            sends.add(producer.newMessage(txn).value(value).sendAsync());
        }
        CompletableFuture.allOf(sends.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
        return new OneMessageEach(txns, values);
    }

    /** One case of a try: {verdict, what happened} for `kind` on `topic` of its own `namespace`. */
    interface Case {
        String[] run(String kind, String namespace, String topic) throws Exception;
    }

    /** A try of cases, each on a topic of its own one-bundle namespace `public/<prefix>-<run>-<n>-<i>`
     *  (an unload moves only that case's topic); the try shows the bug when a case's verdict is
     *  `showing` and the case is not one of the `controls`. */
    void attemptCases(int n, String prefix, List<String> cases, List<String> controls, String showing,
                      Case contest) {
        boolean shows = false;
        List<String> parts = new ArrayList<>();
        List<String> examples = new ArrayList<>();
        try {
            for (int i = 0; i < cases.size(); i++) {
                String kind = cases.get(i);
                String namespace = "public/" + prefix + "-" + run + "-" + n + "-" + i;
                admin.createNamespace(namespace, 1);
                String topic = "persistent://" + namespace + "/" + kind;
                String[] outcome = contest.run(kind, namespace, topic);
                shows |= !controls.contains(kind) && outcome[0].equals(showing);
                parts.add(kind + ": " + outcome[1]);
                examples.add(kind + ": " + topic);
            }
            out.attempt(n, shows, String.join("; ", parts), examples);
        } catch (Exception err) {
            out.error("try " + n, err);
        }
    }

    /** Asks for everything unacknowledged again, as an application whose transaction ended would, and
     *  returns the ids `consumer` is given in the next `seconds`. */
    static List<MessageId> givenAgain(Consumer<String> consumer, int seconds) throws Exception {
        consumer.redeliverUnacknowledgedMessages();
        List<MessageId> again = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            Message<String> message = consumer.receive(500, TimeUnit.MILLISECONDS);
            if (message != null) {
                again.add(message.getMessageId());
            }
        }
        return again;
    }

    /** What `consumer` receives (each acknowledged) until nothing comes for `waitS`, at most `limit`. */
    static List<String> receiveAll(Consumer<String> consumer, int limit, int waitS) throws Exception {
        List<String> got = new ArrayList<>();
        for (int i = 0; i < limit; i++) {
            Message<String> message = consumer.receive(waitS, TimeUnit.SECONDS);
            if (message == null) {
                break;
            }
            got.add(message.getValue());
            consumer.acknowledge(message);
        }
        return got;
    }

    /** A Failover subscription `subscription` of `topic` from its earliest message, one consumer. */
    static Consumer<String> failover(PulsarClient client, String topic, String subscription, int receiverQueue)
            throws Exception {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName(subscription)
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).receiverQueueSize(receiverQueue)
                .subscribe();
    }

    /** The values a fresh Reader of `topic` reads from its start: at most `max`, each waited for up to
     *  `waitS` s (fewer when one does not come: the partition holds its readers). */
    static List<String> readFromStart(PulsarClient client, String topic, int max, int waitS) throws Exception {
        List<String> read = new ArrayList<>();
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic).startMessageId(MessageId.earliest)
                .create()) {
            for (int i = 0; i < max; i++) {
                Message<String> message = reader.readNext(waitS, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                read.add(message.getValue());
            }
        }
        return read;
    }

    /** The next `count` messages `consumer` receives, not acknowledged; fewer when one does not come within
     *  `waitS` (the caller names that a failed set-up). */
    static List<Message<String>> receiveEach(Consumer<String> consumer, int count, int waitS) throws Exception {
        List<Message<String>> got = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message<String> message = consumer.receive(waitS, TimeUnit.SECONDS);
            if (message == null) {
                break;
            }
            got.add(message);
        }
        return got;
    }

    /** What a fresh Exclusive subscription `subscription` of `topic` from its earliest message receives
     *  (each acknowledged) until a value ending in `/sentinel` comes or `seconds` pass. */
    static Set<String> readUntilSentinel(PulsarClient client, String topic, String subscription, int seconds)
            throws Exception {
        Set<String> got = new HashSet<>();
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName(subscription)
                .subscriptionType(SubscriptionType.Exclusive)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < deadline) {
                Message<String> message = consumer.receive(1, TimeUnit.SECONDS);
                if (message == null) {
                    continue;
                }
                got.add(message.getValue());
                consumer.acknowledge(message);
                if (message.getValue().endsWith("/sentinel")) {
                    break;
                }
            }
        }
        return got;
    }

    /** `ledger:entry` of a v4 message id. */
    static String position(MessageId id) {
        if (id instanceof MessageIdImpl m) {
            return m.getLedgerId() + ":" + m.getEntryId();
        }
        return String.valueOf(id);
    }

    /** Every active broker's HTTP URL (`pulsar-admin brokers list CLUSTER`). */
    List<String> listBrokers() throws Exception {
        Matcher cluster = Pattern.compile("\"([^\"]+)\"").matcher(admin.get("/admin/v2/clusters"));
        if (!cluster.find()) {
            throw new IllegalStateException("no cluster");
        }
        List<String> found = new ArrayList<>();
        Matcher broker = Pattern.compile("\"([^\"]+)\"").matcher(admin.get("/admin/v2/brokers/" + cluster.group(1)));
        while (broker.find()) {
            found.add("http://" + broker.group(1));
        }
        return found;
    }

    /** Every broker's HTTP URL, for a program that needs two brokers at least (a set-up step). */
    List<String> twoBrokersOrMore() throws SetUpFailed {
        List<String> brokers = setUp("brokers", this::listBrokers);
        if (brokers.size() < 2) {
            throw new SetUpFailed("brokers", new IllegalStateException("two brokers needed, found " + brokers));
        }
        out.info("brokers", String.join(", ", brokers));
        return brokers;
    }

    /** Every broker of a multi-host service URL (`pulsar://h:1,h:2`), one URL each. */
    /** Where `id` is in `ids` (by ledger, entry and batch index; -1 when absent). */
    static int indexOf(List<MessageId> ids, MessageId id) {
        String where = position(id);
        for (int i = 0; i < ids.size(); i++) {
            if (position(ids.get(i)).equals(where)) {
                return i;
            }
        }
        return -1;
    }

    /** `count` unbatched messages `<prefix>/<i>` to `topic`; their ids in order. */
    static List<MessageId> publishUnbatched(PulsarClient client, String topic, int count, String prefix)
            throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < count; i++) {
                ids.add(producer.send(prefix + "/" + i));
            }
        }
        return ids;
    }

    static List<String> serviceBrokers(String service) {
        List<String> found = new ArrayList<>();
        for (String host : service.replaceFirst("^pulsar://", "").split(",")) {
            found.add("pulsar://" + host.trim().replaceAll("/+$", ""));
        }
        return found;
    }

    /** Infinite retention on public/default, as txnbench's set-up gives its namespaces: without it a
     *  restart trims the ledgers a subscription read to their end (a set-up step). */
    void keepEverythingOnDefault() throws SetUpFailed {
        setUp("infinite retention on public/default", () -> admin.call("POST",
                "/admin/v2/namespaces/public/default/retention",
                "{\"retentionTimeInMinutes\":-1,\"retentionSizeInMB\":-1}"));
    }

    /** `pulsar-admin topics unload NAMESPACE/LOCAL`: "ok", or "failed: why" (a step the try reports, not ends). */
    String unloadOutcome(String namespace, String local) {
        try {
            admin.unloadTopic(namespace, local);
            return "ok";
        } catch (Exception err) {
            return "failed: " + Out.trim(Out.describe(err));
        }
    }

    /** The HTTP URL of `namespace/topic`'s owner, asked through `broker` (which may assign it), or
     *  "? (why)". */
    static String ownerVia(String broker, String namespace, String topic) {
        try {
            return new Admin(broker).ownerHttpUrl(namespace, topic);
        } catch (Exception err) {
            return "? (" + Out.trim(Out.describe(err)) + ")";
        }
    }

    /** The HTTP URL of the broker serving the coordinator of `txn` (v4: the owner of its
     *  `transaction_coordinator_assign` partition), asked through `broker`. */
    static String coordinatorVia(String broker, Transaction txn) {
        return ownerVia(broker, "pulsar/system",
                "transaction_coordinator_assign-partition-" + txn.getTxnID().getMostSigBits());
    }

    /** Two brokers cut from the metadata store in turn, as the re-acquired-lock programs need them: X for
     *  `xS` s from now; later, while X is still cut and with time for B's session (`sessionS` s) to expire
     *  before X's link mends, B for `bS` s. Each step says why it was not made ("" when it was). */
    final class CutsInTurn {
        private final long start = System.nanoTime();
        private final int xS;
        private final int sessionS;
        private long mended;

        CutsInTurn(int xS, int sessionS) {
            this.xS = xS;
            this.sessionS = sessionS;
            this.mended = start + TimeUnit.SECONDS.toNanos(xS);
        }

        String cutX(String x) {
            return cutFromMetadata(x, xS) ? "" : "X's cut was not made";
        }

        /** Waits until X's session has expired and its locks are gone (a few seconds past the session). */
        void awaitXSessionGone() {
            sleepUntil(start + TimeUnit.SECONDS.toNanos(sessionS + 3));
        }

        String cutB(String b, int bS) {
            long now = System.nanoTime();
            if (start + TimeUnit.SECONDS.toNanos(xS) - now < TimeUnit.SECONDS.toNanos(sessionS + 2)) {
                return "too late to cut B: X's link mends before B's session would expire";
            }
            if (!cutFromMetadata(b, bS)) {
                return "B's cut was not made";
            }
            mended = Math.max(mended, now + TimeUnit.SECONDS.toNanos(bS));
            return "";
        }

        /** When every cut made so far is mended (System.nanoTime's clock). */
        long mended() {
            return mended;
        }
    }

    /** Sleeps until `nanoTime` (System.nanoTime's clock); at once when it has passed. */
    static void sleepUntil(long nanoTime) {
        Out.sleep(Math.max(0, TimeUnit.NANOSECONDS.toMillis(nanoTime - System.nanoTime())));
    }

    /** The innermost cause of `err`: what a failed future's wrappers are about. */
    static Throwable rootCause(Throwable err) {
        Throwable root = err;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root;
    }

    /** Orders two {ledger, entry} positions. */
    static int compare(long[] a, long[] b) {
        return a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]);
    }
}
