// Reproduces docs/findings/historical/terminated-topic-unreadable-after-reload.md with Pulsar's own
// Java client. Written by txnbench (not fetched).
//
// What Pulsar promises: a terminated topic keeps every message published before the termination
// readable; a reader or consumer reads them all and then learns that the topic reached its end.
// The broker that loads a terminated topic again (after an unload, a restart or a bundle move)
// keeps the managed ledger's current ledger unset; on the releases this finding names,
// GET_LAST_MESSAGE_ID there (ServerCnx.getLargestBatchIndexWhenPossible ->
// ManagedLedgerImpl.asyncReadEntry) throws a NullPointerException, and the broker closes the
// client's whole connection: every `Reader.hasMessageAvailable()` fails, and with it every other
// producer and consumer that shared the connection.
//
// Per try: a topic in a namespace that retains everything; MESSAGES plain messages; the topic is
// terminated (`pulsar-admin topics terminate`) and unloaded (`pulsar-admin topics unload`), so
// the next lookup loads it again. Then (1) a Reader from the earliest position reads while
// `hasMessageAvailable()` says so, and (2) a consumer of a new subscription from the earliest
// position receives until nothing arrives for RECEIVE_WAIT_S and is asked whether it reached the
// end of the topic. The bug shows when either did not get every message, or
// `hasMessageAvailable()` failed.
//
//   java -cp <pulsar-client jars>:. TerminatedTopicUnreadableAfterReload --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public final class TerminatedTopicUnreadableAfterReload extends Repro {
    private static final int MESSAGES = 10;
    private static final int RECEIVE_WAIT_S = 5;
    private static final int LAST_ID_WAIT_S = 40;   // past the client's operation timeout (20 s)
    private final String namespace = "public/terminated-" + run;
    private PulsarClient client;

    private TerminatedTopicUnreadableAfterReload(Cli cli) {
        super(cli, PulsarClient.class);
    }

    public static void main(String[] argv) {
        Out.run(argv, TerminatedTopicUnreadableAfterReload::new);
    }

    @Override
    void setUp() throws Exception {
        client = setUp("namespace, client", () -> {
            admin.createNamespace(namespace, 1);
            return v4Client(false, 20, false);
        });
    }

    @Override
    void attempt(int n) throws Exception {
        String name = "terminated-" + n;
        String topic = "persistent://" + namespace + "/" + name;
        List<String> sent = new ArrayList<>();
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            for (int i = 0; i < MESSAGES; i++) {
                String value = "m" + i;
                producer.send(value);
                sent.add(value);
            }
        }
        String path = "/admin/v2/persistent/" + namespace + "/" + name;
        out.info("try " + n + " terminated at", admin.call("POST", path + "/terminate", null));
        admin.put(path + "/unload", null);
        out.info("try " + n + " unloaded", topic);

        List<String> examples = new ArrayList<>();
        List<String> readerGot = new ArrayList<>();
        String readerProblem = "";
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            for (int i = 0; i <= MESSAGES; i++) {
                boolean available;
                try {
                    available = reader.hasMessageAvailableAsync().get(LAST_ID_WAIT_S, TimeUnit.SECONDS);
                } catch (Exception err) {
                    readerProblem = "hasMessageAvailable() failed after " + readerGot.size() + " message(s): "
                            + Out.describe(err);
                    break;
                }
                if (!available) {
                    break;
                }
                Message<String> message = reader.readNext(RECEIVE_WAIT_S, TimeUnit.SECONDS);
                if (message == null) {
                    readerProblem = "hasMessageAvailable() said true and readNext gave nothing";
                    break;
                }
                readerGot.add(message.getValue());
            }
        }
        examples.add("reader read " + readerGot + (readerProblem.isEmpty() ? "" : "; " + readerProblem));

        List<String> consumerGot;
        boolean reachedEnd;
        try (Consumer<String> consumer = client.newConsumer(Schema.STRING).topic(topic)
                .subscriptionName("check-" + n).subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe()) {
            consumerGot = receiveAll(consumer, MESSAGES + 1, RECEIVE_WAIT_S);
            reachedEnd = consumer.hasReachedEndOfTopic();
        }
        examples.add("consumer received " + consumerGot + ", hasReachedEndOfTopic()=" + reachedEnd);

        boolean readerFailed = !readerProblem.isEmpty() || !readerGot.equals(sent);
        boolean consumerFailed = !consumerGot.equals(sent);
        String summary;
        if (readerFailed || consumerFailed) {
            summary = "after the terminated topic was loaded again, "
                    + (readerFailed ? "the reader did not read its " + MESSAGES + " messages"
                       + (readerProblem.isEmpty() ? "" : " (" + readerProblem + ")") : "the reader read them all")
                    + "; " + (consumerFailed ? "a consumer received " + consumerGot.size() + " of " + MESSAGES
                       : "a consumer received them all");
        } else {
            summary = "the reloaded terminated topic gave the reader and a consumer all " + MESSAGES
                    + " messages (consumer hasReachedEndOfTopic()=" + reachedEnd + ")";
        }
        out.attempt(n, readerFailed || consumerFailed, summary, examples);
    }
}
