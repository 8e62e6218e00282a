// Reproduces docs/findings/empty-terminated-topic-rejects-readers.md with Pulsar's own Java client
// and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a terminated topic stays readable; a Reader from the earliest position
// reads what it holds (nothing, for a topic that never got a message) and learns it reached the
// end of the topic.
//
// What the managed ledger does (4.0.8 and 5.0.1 alike): when it loads a terminated managed ledger
// again, ManagedLedgerImpl.initializeBookKeeper drops every ledger with no entries from its
// in-memory `ledgers` map (it deletes them from BookKeeper only when not terminated, and creates
// no new ledger for a terminated one). A terminated managed ledger whose ledgers are all empty is
// left with none, and ManagedLedgerImpl.getFirstPosition() calls `ledgers.firstKey()`, which
// throws NoSuchElementException on an empty ConcurrentSkipListMap (its `== null` check never
// fires). A Reader from the earliest position (NonDurableCursorImpl's constructor, via
// PersistentTopic.getNonDurableSubscription -> ManagedLedgerImpl.newNonDurableCursor) calls it:
// the broker answers the subscribe with UnknownError, every time, for as long as the topic exists.
//
// Per try, on a v4 topic (the default): in a namespace of its own, (1) a topic that never got a
// message, created by a producer that sends nothing and terminated (`pulsar-admin topics terminate`); a Reader
// from earliest before the topic is loaded again; the topic unloaded (`topics unload`); a Reader
// from earliest twice, and a durable subscription from earliest; (2) the control: the same with one
// message published before the termination. The bug shows when the Reader of the empty topic could
// not be created after the reload while the control's read its message.
//
// With `--segments true` (a v5 cluster, 5.0.1: PIP-460 scalable topics), per try: a scalable topic
// with two segments and no message, the two merged (`POST /admin/v2/scalable/.../merge/0/1`, which
// terminates both), a Reader from earliest on the first segment before and after the namespace is
// unloaded (5.0.1 has no per-segment unload). Readers of a segment go through
// PulsarClientImpl.createSegmentReaderAsync (called by reflection, so that the program compiles
// against any release's client; the v4 API refuses segment:// names).
//
//   java -cp <pulsar-client jars>:. EmptyTerminatedTopicRejectsReaders --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--segments false] [--listener external]

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public final class EmptyTerminatedTopicRejectsReaders extends Repro {
    private static final int OPEN_WAIT_S = 45;       // past the client's operation timeout (20 s)
    private static final int RECEIVE_WAIT_S = 5;
    private final boolean segments = Boolean.parseBoolean(cli.get("--segments", "false"));
    private final String namespace = "public/empty-terminated-" + run;
    private PulsarClient client;

    private EmptyTerminatedTopicRejectsReaders(Cli cli) {
        super(cli, PulsarClient.class);
    }

    public static void main(String[] argv) {
        Out.run(argv, EmptyTerminatedTopicRejectsReaders::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("topics", segments ? "v5 segments (a scalable topic's two segments, merged)" : "v4 persistent topics");
        client = setUp("namespace, client", () -> {
            if (!segments) {
                admin.createNamespace(namespace, 1);
            }
            return v4Client(false, 20, true);
        });
    }

    @Override
    void attempt(int n) throws Exception {
        if (segments) {
            attemptSegments(n);
        } else {
            attemptTopics(n);
        }
    }

    // ---- v4 topics ---------------------------------------------------------------------------

    private void attemptTopics(int n) throws Exception {
        List<String> examples = new ArrayList<>();
        String empty = "persistent://" + namespace + "/empty-" + n;
        String emptyPath = "/admin/v2/persistent/" + namespace + "/empty-" + n;
        client.newProducer(Schema.STRING).topic(empty).create().close();   // created, never written
        out.info("try " + n + " empty topic terminated at", admin.call("POST", emptyPath + "/terminate", null));
        String before = openReader(n, "empty topic, before the reload", empty, null);
        admin.put(emptyPath + "/unload", null);
        out.info("try " + n + " unloaded", empty);
        String after = openReader(n, "empty topic, after the reload", empty, null);
        Thread.sleep(2000);
        String again = openReader(n, "empty topic, after the reload, again", empty, null);
        String durable = subscribeDurable(n, empty, "durable-check");
        String durableAgain = subscribeDurable(n, empty, "durable-check");
        examples.add("never-written terminated topic: Reader from earliest before the reload: " + before
                + "; after it: " + after + "; 2 s later: " + again);
        examples.add("same topic, a new durable subscription from earliest: " + durable + "; the same name again: "
                + durableAgain);

        String written = "persistent://" + namespace + "/written-" + n;
        String writtenPath = "/admin/v2/persistent/" + namespace + "/written-" + n;
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(written).create()) {
            producer.send("m0");
        }
        out.info("try " + n + " control topic terminated at", admin.call("POST", writtenPath + "/terminate", null));
        admin.put(writtenPath + "/unload", null);
        String control = openReader(n, "control (one message), after the reload", written, null);
        examples.add("control, one message before the termination: Reader from earliest after the reload: " + control);

        boolean emptyFails = !after.startsWith("opened");
        boolean controlOk = control.startsWith("opened") && control.contains("[m0]");
        boolean shows = emptyFails && controlOk;
        String summary = emptyFails
                ? "a Reader from earliest could not be created on the terminated topic that never held a message once "
                  + "it was loaded again (" + after + ")" + (controlOk ? "; the control topic's Reader read its message"
                  : "; the control failed too: " + control)
                : "the Reader of the reloaded empty terminated topic was created (" + after + ")";
        if (!controlOk) {
            out.info("try " + n + " control", "the control topic's Reader did not read its message: " + control);
        }
        out.attempt(n, shows, summary, examples);
    }

    private String subscribeDurable(int n, String topic, String name) {
        long start = System.nanoTime();
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic).subscriptionName(name)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribeAsync()
                .get(OPEN_WAIT_S, TimeUnit.SECONDS)) {
            Message<String> message = consumer.receive(RECEIVE_WAIT_S, TimeUnit.SECONDS);
            String result = "subscribed in " + Out.ms(start) + " ms, received " + (message == null ? "nothing"
                    : message.getValue()) + ", hasReachedEndOfTopic()=" + consumer.hasReachedEndOfTopic();
            out.info("try " + n + " durable subscription " + name, result);
            return result;
        } catch (Exception err) {
            String result = "FAILED after " + Out.ms(start) + " ms: " + Out.describe(err);
            out.info("try " + n + " durable subscription " + name, result);
            return result;
        }
    }

    // ---- v5 segments -------------------------------------------------------------------------

    private void attemptSegments(int n) throws Exception {
        String local = "empty-merged-" + run + "-" + n;
        String rest = "/admin/v2/scalable/public/default/" + local;
        admin.createScalableTopic(local, 2);
        List<String> before = segments(admin.get(rest));
        out.info("try " + n + " segments", before);
        if (before.size() < 2) {
            out.error("try " + n + ": the scalable topic has no two segments to merge: " + admin.get(rest), null);
            return;
        }
        String first = "segment://public/default/" + local + "/" + before.get(0);
        admin.call("POST", rest + "/merge/" + id(before.get(0)) + "/" + id(before.get(1)), null);
        out.info("try " + n + " merged, layout", admin.get(rest));
        List<String> examples = new ArrayList<>();
        String pre = openReader(n, "merged-away segment, before the reload", null, first);
        admin.unloadNamespace("public/default");
        out.info("try " + n + " unloaded", "namespace public/default");
        String post = openReader(n, "merged-away segment, after the reload", null, first);
        Thread.sleep(2000);
        String again = openReader(n, "merged-away segment, after the reload, again", null, first);
        examples.add(first + " (never written, terminated by the merge): Reader from earliest before the reload: "
                + pre + "; after it: " + post + "; 2 s later: " + again);
        boolean shows = !post.startsWith("opened");
        String summary = shows
                ? "a Reader from earliest could not be created on the merged-away segment that never held a message "
                  + "once it was loaded again (" + post + ")"
                : "the Reader of the reloaded merged-away segment was created (" + post + ")";
        out.attempt(n, shows, summary, examples);
    }

    /** The segment descriptors (`<start>-<end>-<id>`, hex hash range) of a layout, in order of appearance:
     *  5.0.1 answers `{"segments":{"0":{"segmentId":0,"hashRange":{"start":0,"end":32767},...},...}}`. */
    private static List<String> segments(String layout) {
        Set<String> found = new LinkedHashSet<>();
        Matcher m = Pattern.compile("\"segmentId\"\\s*:\\s*(\\d+)\\s*,\\s*\"hashRange\"\\s*:\\s*\\{\\s*"
                + "\"start\"\\s*:\\s*(\\d+)\\s*,\\s*\"end\"\\s*:\\s*(\\d+)").matcher(layout);
        while (m.find()) {
            found.add(String.format("%04x-%04x-%d", Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)),
                    Integer.parseInt(m.group(1))));
        }
        return new ArrayList<>(found);
    }

    private static String id(String descriptor) {
        return descriptor.substring(descriptor.lastIndexOf('-') + 1);
    }

    // ---- readers -----------------------------------------------------------------------------

    /** Opens a Reader from earliest on `topic` (or on `segment`), reads while it can; what happened. */
    private String openReader(int n, String what, String topic, String segment) {
        long start = System.nanoTime();
        String result;
        try (Reader<String> reader = createReader(topic, segment).get(OPEN_WAIT_S, TimeUnit.SECONDS)) {
            long opened = Out.ms(start);
            List<String> read = new ArrayList<>();
            while (read.size() < 10 && reader.hasMessageAvailableAsync().get(OPEN_WAIT_S, TimeUnit.SECONDS)) {
                Message<String> message = reader.readNext(RECEIVE_WAIT_S, TimeUnit.SECONDS);
                if (message == null) {
                    break;
                }
                read.add(message.getValue());
            }
            result = "opened in " + opened + " ms, read " + read + ", hasReachedEndOfTopic()="
                    + reader.hasReachedEndOfTopic();
        } catch (Exception err) {
            result = "FAILED after " + Out.ms(start) + " ms: " + Out.describe(err);
        }
        out.info("try " + n + " reader (" + what + ")", result);
        return result;
    }

    @SuppressWarnings("unchecked")
    private CompletableFuture<Reader<String>> createReader(String topic, String segment) throws Exception {
        if (segment == null) {
            return client.newReader(Schema.STRING).topic(topic).startMessageId(MessageId.earliest).createAsync();
        }
        org.apache.pulsar.client.impl.conf.ReaderConfigurationData<String> conf =
                new org.apache.pulsar.client.impl.conf.ReaderConfigurationData<>();
        conf.setTopicName(segment);
        conf.setStartMessageId(MessageId.earliest);
        Method create = client.getClass().getMethod("createSegmentReaderAsync",
                org.apache.pulsar.client.impl.conf.ReaderConfigurationData.class, Schema.class);
        return (CompletableFuture<Reader<String>>) create.invoke(client, conf, Schema.STRING);
    }
}
