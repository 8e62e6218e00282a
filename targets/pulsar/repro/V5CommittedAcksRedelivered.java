// Reproduces docs/findings/v5-committed-acks-redelivered-after-crash.md with Pulsar's own Java
// client (the v5 API of pulsar-client-v5; its v4 API only to find a segment's broker) and the
// admin REST API. Written by txnbench (not fetched).
//
// What Pulsar promises: messages acknowledged in a transaction that committed are never
// delivered to that subscription again (consume-transform-produce is exactly-once).
//
// Per try, three cases, each on a fresh scalable topic of one segment: MESSAGES messages are
// published, received on a Shared (queue) subscription and acknowledged in one transaction; then
//  * `still` (the control): the transaction commits;
//  * `moved`: the segment moves while the transaction is open (5.0.1 has no segment unload, so the
//    namespace is unloaded: `pulsar-admin namespaces unload public/default`), then it commits;
//  * `crashed`: it commits, and the broker that owns the segment is killed with SIGKILL at once
//    and started again (asked of whoever runs this, see Out.ask).
// Then the consumer is closed and the subscription opened again: an acknowledged message that
// comes back is a committed ack lost. 5.0.1's MetadataPendingAckStore recovers a moved
// subscription's pending acks as transaction ids only (no positions), so commitTxn applies
// nothing; and a commit's acks reach the cursor in memory only (the mark-delete is rate limited)
// while their op records are deleted at once, so a crash after the commit loses them.
//
//   java -cp <pulsar-client-v5 jars>:. V5CommittedAcksRedelivered --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1] [--cases still,moved,crashed]

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class V5CommittedAcksRedelivered extends Repro {
    private static final int MESSAGES = 4;
    /** How often a case runs again, on a fresh topic, when its commit is refused (see runCaseAgainIfRefused). */
    private static final int CASE_ATTEMPTS = 3;
    /** The v5 API's transactional ack returns before the broker has it and gives no future to wait on. */
    private static final long ACKS_SETTLE_MS = 1_000;

    private V5Clients clients;
    private PulsarClient client;

    private V5CommittedAcksRedelivered(Cli cli) {
        super(cli, PulsarClient.class);
    }

    /** What one case saw: the values it acked, and which came back before and after the commit. */
    private record Case(String name, String topic, List<String> acked, List<String> whileOpen, List<String> after,
                        String note) {
        List<String> lost() {
            List<String> out = new ArrayList<>(after);
            out.retainAll(acked);
            return out;
        }
    }

    public static void main(String[] argv) {
        Out.run(argv, V5CommittedAcksRedelivered::new);
    }

    @Override
    void setUp() throws Exception {
        clients = V5Clients.of(this);
        client = clients.client;
    }

    @Override
    void attempt(int n) throws Exception {
        String[] cases = cli.get("--cases", "still,moved,crashed").split(",");
        Map<String, Case> seen = new LinkedHashMap<>();
        for (String name : cases) {
            seen.put(name, runCaseAgainIfRefused(n, name.trim()));
        }
        List<String> examples = new ArrayList<>();
        List<String> parts = new ArrayList<>();
        boolean shows = false;
        for (Case c : seen.values()) {
            List<String> lost = c.lost();
            shows |= !lost.isEmpty();
            parts.add(c.name + ": " + lost.size() + " of " + c.acked.size() + " committed acks lost"
                    + (c.note.isEmpty() ? "" : " (" + c.note + ")"));
            if (!lost.isEmpty()) {
                examples.add(c.name + " " + c.topic + ": acked in a committed transaction " + c.acked
                        + "; delivered again while it was open " + c.whileOpen
                        + "; delivered to the subscription opened again after the commit " + c.after);
            }
        }
        out.attempt(n, shows, String.join("; ", parts), examples);
    }

    /**
     * A case whose commit the client refuses because one of its acks failed (an ack still on its way
     * when the move began: on a busy machine it can be overtaken by the unload) ran no experiment: the
     * transaction never committed, so nothing can be judged. It runs again on a fresh topic, at most
     * CASE_ATTEMPTS times, each refusal said in an info line.
     */
    private Case runCaseAgainIfRefused(int n, String name) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return runCase(n, name, attempt);
            } catch (org.apache.pulsar.client.api.v5.PulsarClientException.TransactionConflictException refused) {
                out.info("case " + name + " attempt " + attempt + ": commit refused", Out.trim(refused.getMessage()));
                if (attempt >= CASE_ATTEMPTS) {
                    throw refused;
                }
            }
        }
    }

    private Case runCase(int n, String name, int attempt) throws Exception {
        String local = "acks-" + name + "-" + run + "-" + n + (attempt > 1 ? "-" + attempt : "");
        String topic = "topic://public/default/" + local;
        admin.createScalableTopic(local, 1);
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(topic).create()) {
            QueueConsumer<String> consumer = subscribe(topic);
            try {
                return judged(name, local, topic, producer, consumer);
            } finally {
                closeQuietly(consumer);   // judged closes it before it subscribes again; a refused case too
            }
        }
    }

    private Case judged(String name, String local, String topic, Producer<String> producer,
                        QueueConsumer<String> consumer) throws Exception {
        List<String> acked = new ArrayList<>();
        List<String> whileOpen = new ArrayList<>();
        String note = "";
        for (int i = 0; i < MESSAGES; i++) {
            producer.newMessage().value(run + "/" + name + "-" + i).send();
        }
        List<Message<String>> received = drain(consumer, 15_000, 2_000, MESSAGES);
        if (received.size() != MESSAGES) {
            return new Case(name, topic, List.of(), List.of(), List.of(),
                    "received " + received.size() + " of " + MESSAGES + " before the acks: not judged");
        }
        Transaction txn = client.newTransaction();
        for (Message<String> message : received) {
            consumer.acknowledge(message.id(), txn);
            acked.add(message.value());
        }
        Thread.sleep(ACKS_SETTLE_MS);
        if (name.equals("moved")) {
            admin.unloadNamespace("public/default");
            Thread.sleep(3000);   // the consumer reattaches to the segment's next owner
            for (Message<String> message : drain(consumer, 1_000, 1_000, MESSAGES * 2)) {
                whileOpen.add(message.value());
            }
            note = "namespace public/default unloaded between the acks and the commit";
        }
        txn.commit();
        if (name.equals("crashed")) {
            String owner = clients.owner(admin.firstSegment(local));
            boolean killed = out.ask("kill-broker", owner, "kill -9 the broker serving " + owner
                    + " and start it again, then answer `done`");
            note = killed ? "the segment's broker " + owner + " killed (SIGKILL) right after the commit"
                    : "the segment's broker was not killed";
        }
        consumer.close();
        QueueConsumer<String> again = subscribe(topic);
        List<String> after = new ArrayList<>();
        try {
            for (Message<String> message : drain(again, name.equals("crashed") ? 40_000 : 4_000, 4_000,
                    MESSAGES * 2)) {
                after.add(message.value());
            }
        } finally {
            closeQuietly(again);
        }
        return new Case(name, topic, acked, whileOpen, after, note);
    }

    private static void closeQuietly(QueueConsumer<String> consumer) {
        try {
            consumer.close();
        } catch (Exception alreadyClosed) {
            // closed before, or its connection is gone: nothing is left to release
        }
    }

    private QueueConsumer<String> subscribe(String topic) throws Exception {
        return client.newQueueConsumer(Schema.string()).topic(topic).subscriptionName("s")
                .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST).subscribe();
    }

    /** Receives until `limit` messages, the first waiting `firstMs`, later ones `quietMs`. */
    private static List<Message<String>> drain(QueueConsumer<String> consumer, long firstMs, long quietMs, int limit)
            throws Exception {
        List<Message<String>> out = new ArrayList<>();
        while (out.size() < limit) {
            Message<String> message = consumer.receive(Duration.ofMillis(out.isEmpty() ? firstMs : quietMs));
            if (message == null) {
                break;
            }
            out.add(message);
        }
        return out;
    }
}
