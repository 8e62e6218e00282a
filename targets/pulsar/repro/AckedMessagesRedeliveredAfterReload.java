// Reproduces docs/findings/historical/acked-messages-redelivered-after-reload.md with Pulsar's
// own Java client (the v4 API, persistent:// topics) and the admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: a message acknowledged (plainly, or in a transaction whose commit returned OK)
// is not delivered to that subscription again, also after the topic is loaded again.
//
// What it does, per try: a namespace of one bundle with two topics, `txn` and `plain`, each with a
// Shared subscription. The brokers roll a ledger every 20 entries (the finding's broker settings,
// as the chaos scenario's). MESSAGES messages are published to each topic and received; the message
// at index HOLD (default 16: the fourth from the end of the first ledger) is left unacknowledged,
// every other one is acknowledged (each acknowledgement confirmed by the broker): on `txn` in
// transactions of PER_TXN messages each (every commit returned OK), on `plain` plainly. So the
// subscription's cursor holds its mark-delete position just before HOLD and individually deleted
// ranges from HOLD+1 to the end. The cursors (internal stats) are read; the consumers are closed;
// the topics move: `pulsar-admin namespaces unload`, or (`--fault restart`) a graceful restart of
// their owner broker (asked of whoever runs this, see Out.ask). Then a fresh consumer of each
// subscription receives until nothing arrives for QUIET_MS, acknowledging each message as it comes,
// the held one HOLD_MS after it came (default 0: at once; with `--hold-ms 5000` the dispatcher has
// finished its reads before the held message is acknowledged, the control).
// The bug shows when a message acknowledged before the move is delivered again. Where (up to 3.2):
// the dispatcher reads the acknowledged ranges again from the mark-delete position and drops them
// after the read (ManagedCursorImpl.filterReadEntries, individually deleted ranges only); the held
// message's acknowledgement moves the mark-delete position over them and takes them out of those
// ranges, so a read of them still in flight passes the filter. 3.3+ does not issue reads of
// entries deleted when the read starts (apache/pulsar#21739).
//
//   java -cp <pulsar-client jars>:. AckedMessagesRedeliveredAfterReload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 3] [--messages 50] [--hold 16] [--per-txn 4]
//       [--fault unload|restart] [--topics txn,plain] [--quiet-ms 5000] [--hold-ms 0]

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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

public final class AckedMessagesRedeliveredAfterReload extends Repro {
    private static final String SUBSCRIPTION = "s";

    private final int messages;
    private final int hold;
    private final int perTxn;
    private final long quietMs;
    private final long holdMs;
    private final String fault;
    private final List<String> kinds;
    private PulsarClient client;

    private AckedMessagesRedeliveredAfterReload(Cli cli) {
        super(cli, PulsarClient.class, 8, 3);
        this.messages = cli.integer("--messages", 50);
        this.hold = cli.integer("--hold", 16);
        this.perTxn = cli.integer("--per-txn", 4);
        this.quietMs = cli.integer("--quiet-ms", 5000);
        this.holdMs = cli.integer("--hold-ms", 0);
        this.fault = cli.get("--fault", "unload");
        this.kinds = List.of(cli.get("--topics", "txn,plain").split(","));
    }

    public static void main(String[] argv) {
        Out.run(argv, AckedMessagesRedeliveredAfterReload::new);
    }

    @Override
    void setUp() throws Exception {
        out.info("plan", tries + " tries; per try topics " + kinds + ", each: " + messages + " messages, all "
                + "acknowledged but index " + hold + " (on `txn` in committed transactions of " + perTxn
                + ", on `plain` plainly), then " + ("restart".equals(fault)
                ? "a graceful restart of their owner broker" : "an unload of their namespace")
                + ", then a fresh consumer of each subscription, acknowledging the held message "
                + (holdMs == 0 ? "at once" : holdMs + " ms after it comes"));
        client = setUp("client", () -> v4Client(true, 30, true));
    }

    /** One topic of a try: what was published, acknowledged, and delivered after the move. */
    private static final class Side {
        final String kind;
        final String topic;
        final Map<String, MessageId> ids = new LinkedHashMap<>();
        final List<String> acked = new ArrayList<>();
        String held = "";
        String before = "";
        String after = "";
        final List<String> againBefore = new ArrayList<>();   // before the held message was acknowledged
        final List<String> again = new ArrayList<>();         // after it was
        final List<String> delivered = new ArrayList<>();
        String problem = "";

        Side(String kind, String topic) {
            this.kind = kind;
            this.topic = topic;
        }
    }

    @Override
    void attempt(int n) throws Exception {
        String namespace = "public/fx-xl-" + run + "-" + n;
        try {
            admin.createNamespace(namespace, 1);
        } catch (Exception err) {
            out.error("try " + n + " set-up (namespace " + namespace + ")", err);
            return;
        }
        List<Side> sides = new ArrayList<>();
        for (String kind : kinds) {
            Side side = new Side(kind, "persistent://" + namespace + "/" + kind);
            sides.add(side);
            try {
                prepare(n, side);
            } catch (Exception err) {
                side.problem = "set-up: " + Out.describe(err);
            }
            side.before = cursor(namespace, kind);
        }
        String owner = admin.ownerOrWhy(namespace, kinds.get(0));
        String moved = admin.move(out, fault, namespace, owner);
        for (Side side : sides) {
            if (side.problem.isEmpty()) {
                try {
                    drain(side);
                } catch (Exception err) {
                    side.problem = "read after the move: " + Out.describe(err);
                }
            }
            side.after = cursor(namespace, side.kind);
        }
        boolean shows = false;
        List<String> parts = new ArrayList<>();
        List<String> examples = new ArrayList<>();
        for (Side side : sides) {
            if (!side.problem.isEmpty()) {
                parts.add(side.kind + ": not judged (" + Out.trim(side.problem) + ")");
                continue;
            }
            shows |= !side.again.isEmpty() || !side.againBefore.isEmpty();
            parts.add(side.kind + ": " + (side.againBefore.size() + side.again.size()) + " of " + side.acked.size()
                    + " acknowledged messages delivered again (" + side.againBefore.size() + " before the held "
                    + "message's acknowledgement, " + side.again.size() + " after it; " + side.delivered.size()
                    + " delivered in all)");
            examples.add(side.kind + ": held " + side.held + "; cursor before the move " + side.before
                    + "; after the reads " + side.after);
            examples.add(side.kind + ": delivered again before the held message's acknowledgement "
                    + side.againBefore + ", after it " + side.again);
        }
        boolean judged = sides.stream().anyMatch(s -> s.problem.isEmpty());
        String summary = "move " + moved + " (owner " + owner + "); " + String.join("; ", parts);
        if (!judged) {
            out.error("try " + n + " could not be judged: " + summary, null);
            return;
        }
        out.attempt(n, shows, summary, examples);
    }

    /** Publishes, receives, acknowledges all but HOLD, and closes the consumer. */
    private void prepare(int n, Side side) throws Exception {
        Consumer<String> consumer = subscribe(side.topic);
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(side.topic).enableBatching(false)
                .sendTimeout(60, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < messages; i++) {
                String value = run + "/" + n + "/" + side.kind + "/" + i;
                side.ids.put(value, producer.send(value));
            }
        }
        Map<String, MessageId> received = new LinkedHashMap<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (received.size() < messages && System.nanoTime() < deadline) {
            Message<String> message = consumer.receive(1, TimeUnit.SECONDS);
            if (message != null) {
                received.put(message.getValue(), message.getMessageId());
            }
        }
        if (received.size() < messages) {
            consumer.close();
            throw new IllegalStateException("received " + received.size() + " of " + messages + " in 60 s");
        }
        List<String> values = new ArrayList<>(side.ids.keySet());
        side.held = position(side.ids.get(values.get(hold))) + " (index " + hold + ")";
        List<String> toAck = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) {
            if (i != hold) {
                toAck.add(values.get(i));
            }
        }
        if (side.kind.equals("txn")) {
            for (int from = 0; from < toAck.size(); from += perTxn) {
                List<String> group = toAck.subList(from, Math.min(toAck.size(), from + perTxn));
                Transaction txn = newTxn(client, 2);
                List<CompletableFuture<Void>> acks = new ArrayList<>();
                for (String value : group) {
                    acks.add(consumer.acknowledgeAsync(received.get(value), txn));
                }
                CompletableFuture.allOf(acks.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
                txn.commit().get(60, TimeUnit.SECONDS);
                side.acked.addAll(group);
            }
        } else {
            for (String value : toAck) {
                consumer.acknowledgeAsync(received.get(value)).get(60, TimeUnit.SECONDS);
                side.acked.add(value);
            }
        }
        consumer.close();
    }

    /** A fresh consumer of the subscription after the move: it acknowledges everything it is given,
     *  the held message HOLD_MS after it arrives (0: at once, as an application does), and receives
     *  until nothing arrives for QUIET_MS. */
    private void drain(Side side) throws Exception {
        Consumer<String> consumer = subscribe(side.topic);
        try {
            Message<String> held = null;
            boolean heldAcked = false;
            long heldAt = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (System.nanoTime() < deadline) {
                long wait = quietMs;
                if (held != null && !heldAcked) {
                    wait = Math.max(1, holdMs - (System.nanoTime() - heldAt) / 1_000_000);
                }
                Message<String> message = consumer.receive((int) wait, TimeUnit.MILLISECONDS);
                if (held != null && !heldAcked && (System.nanoTime() - heldAt) / 1_000_000 >= holdMs) {
                    consumer.acknowledge(held);
                    heldAcked = true;
                }
                if (message == null) {
                    if (held != null && !heldAcked) {
                        continue;
                    }
                    break;
                }
                record(side, message, heldAcked ? side.again : side.againBefore);
                if (held == null && !side.acked.contains(message.getValue())) {
                    held = message;
                    heldAt = System.nanoTime();
                    if (holdMs == 0) {
                        consumer.acknowledge(held);
                        heldAcked = true;
                    }
                } else {
                    consumer.acknowledge(message);
                }
            }
            if (held == null) {
                side.problem = "the held message was not delivered after the move";
            }
        } finally {
            consumer.close();
        }
    }

    private static void record(Side side, Message<String> message, List<String> again) {
        side.delivered.add(message.getValue());
        if (side.acked.contains(message.getValue())) {
            again.add(position(message.getMessageId()));
        }
    }

    private Consumer<String> subscribe(String topic) throws Exception {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName(SUBSCRIPTION)
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS).isAckReceiptEnabled(true).subscribe();
    }

    /** The subscription's cursor in `pulsar-admin topics stats-internal`, and the topic's ledgers. */
    private String cursor(String namespace, String local) {
        try {
            String stats = admin.get("/admin/v2/persistent/" + namespace + "/" + local + "/internalStats");
            Map<String, String> fields = new TreeMap<>();
            for (String name : List.of("markDeletePosition", "individuallyDeletedMessages", "readPosition")) {
                fields.put(name, Admin.field(stats, name));
            }
            return fields.toString();
        } catch (Exception err) {
            return "internal stats unavailable (" + Out.trim(Out.describe(err)) + ")";
        }
    }
}
