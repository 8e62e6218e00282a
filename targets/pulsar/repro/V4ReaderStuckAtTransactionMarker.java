// Reproduces docs/findings/historical/v4-reader-stuck-at-transaction-marker.md with Pulsar's own
// Java client. Written by txnbench (not fetched).
//
// What Pulsar promises: `Reader.hasMessageAvailable()` is true while a message can still be read
// (it compares what the reader has with GET_LAST_MESSAGE_ID). Up to 3.2 the broker answers
// GET_LAST_MESSAGE_ID with the last confirmed entry (2.10-3.1) or the max read position (3.2);
// after a transactional commit that entry is the transaction's commit marker, which no reader is
// ever given. From 3.3 the broker answers the last position a reader can be given.
//
// Per try: a topic; one message in a transaction, committed; one more in a transaction, aborted
// (so the topic ends with markers and an aborted message). A fresh Reader from the earliest
// position then reads while `hasMessageAvailable()` says so, each `readNext` waiting READ_WAIT_S.
// The bug shows when the reader has the committed message and `hasMessageAvailable()` still says
// true while `readNext` gives nothing: a loop `while (reader.hasMessageAvailable()) readNext()`
// never ends.
//
//   java -cp <pulsar-client jars>:. V4ReaderStuckAtTransactionMarker --service-url pulsar://...
//       --admin-url http://<broker>:8080 [--tries 1]

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;

public final class V4ReaderStuckAtTransactionMarker extends Repro {
    private static final int READ_WAIT_S = 5;
    private static final int MAX_READS = 10;    // bounded: two messages exist, one of them aborted
    private PulsarClient client;

    private V4ReaderStuckAtTransactionMarker(Cli cli) {
        super(cli, PulsarClient.class);
    }

    public static void main(String[] argv) {
        Out.run(argv, V4ReaderStuckAtTransactionMarker::new);
    }

    @Override
    void setUp() throws Exception {
        client = setUp("client", () -> v4Client(true, 30, false));
    }

    @Override
    void attempt(int n) throws Exception {
        String topic = "persistent://public/default/reader-marker-" + run + "-" + n;
        try (Producer<String> producer = client.newProducer(Schema.STRING).topic(topic)
                .sendTimeout(0, TimeUnit.SECONDS).create()) {
            Transaction committed = newTxn(client, 1);
            producer.newMessage(committed).value("committed").send();
            committed.commit().get(60, TimeUnit.SECONDS);
            Transaction aborted = newTxn(client, 1);
            producer.newMessage(aborted).value("aborted").send();
            aborted.abort().get(60, TimeUnit.SECONDS);
        }
        out.info("try " + n + " broker's last message id", admin.get(
                "/admin/v2/persistent/public/default/reader-marker-" + run + "-" + n + "/lastMessageId"));
        List<String> read = new ArrayList<>();
        boolean stuck = false;
        try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            for (int i = 0; i < MAX_READS && reader.hasMessageAvailable(); i++) {
                Message<String> message = reader.readNext(READ_WAIT_S, TimeUnit.SECONDS);
                if (message == null) {
                    stuck = true;     // it said a message was there, and none came
                    break;
                }
                read.add(message.getValue() + "@" + message.getMessageId());
            }
        }
        boolean gotCommitted = read.stream().anyMatch(r -> r.startsWith("committed@"));
        boolean gotAborted = read.stream().anyMatch(r -> r.startsWith("aborted@"));
        String summary = stuck
                ? "hasMessageAvailable() stayed true after " + read + ", and readNext gave nothing for " + READ_WAIT_S
                  + " s: a read-to-the-end loop never ends"
                : "the reader read " + read + " and hasMessageAvailable() turned false";
        if (gotAborted) {
            summary += " (it was given the aborted message)";
        }
        out.attempt(n, stuck && gotCommitted, summary, read);
    }
}
