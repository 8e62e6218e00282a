// The two clients a v5 reproduction needs, built one way for every V5 program: the v5 API's
// client (transactions, producers, queue consumers on topic://) and the v4 client beside it
// (PulsarClientImpl's segment methods, which the v5 client itself uses underneath). Both go
// through the given advertised listener when one is named (the pulsar target's clients dial
// through Toxiproxy on the `external` listener). Written by txnbench.
//
// The v4 API refuses segment:// names ("Scalable topics (topic://) require the V5 client SDK");
// the v5 client reads segments through public methods of the same PulsarClientImpl, as these do.

import java.time.Duration;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.PulsarClientBuilder;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.TransactionPolicy;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.conf.ConsumerConfigurationData;
import org.apache.pulsar.client.impl.conf.ReaderConfigurationData;

final class V5Clients {
    final PulsarClient client;
    final org.apache.pulsar.client.api.PulsarClient v4;

    private V5Clients(PulsarClient client, org.apache.pulsar.client.api.PulsarClient v4) {
        this.client = client;
        this.v4 = v4;
    }

    static V5Clients connect(String service, String listener, Duration txnTimeout) throws Exception {
        PulsarClientBuilder builder = PulsarClient.builder().serviceUrl(service)
                .operationTimeout(Duration.ofSeconds(30))
                .transactionPolicy(TransactionPolicy.builder().timeout(txnTimeout).build());
        org.apache.pulsar.client.api.ClientBuilder v4Builder = org.apache.pulsar.client.api.PulsarClient.builder()
                .serviceUrl(service).operationTimeout(30, TimeUnit.SECONDS);
        if (listener != null) {
            builder.listenerName(listener);
            v4Builder.listenerName(listener);
        }
        return new V5Clients(builder.build(), v4Builder.build());
    }

    /** A program's clients on its --service-url (and --listener; transactions time out after
     *  --txn-timeout-s, 120 by default), closed when it ends (the v4 one first); their failure is
     *  the set-up step `clients`. */
    static V5Clients of(Repro program) throws Repro.SetUpFailed {
        return of(program, 120);
    }

    /** The same with another default transaction timeout: a program that plans its waits by
     *  --txn-timeout-s reads it with the same default (Cli refuses two). */
    static V5Clients of(Repro program, int defaultTxnTimeoutS) throws Repro.SetUpFailed {
        Duration txnTimeout = Duration.ofSeconds(program.cli.integer("--txn-timeout-s", defaultTxnTimeoutS));
        V5Clients clients = Repro.setUp("clients", () -> connect(program.cli.required("--service-url"),
                program.cli.get("--listener", null), txnTimeout));
        program.atEnd(clients.client::shutdown);
        program.atEnd(clients.v4);
        return clients;
    }

    /** `value` sent in a transaction of its own, committed, then added to `committed`. */
    void commitOne(Producer<String> producer, String value, Collection<String> committed) throws Exception {
        Transaction txn = client.newTransaction();
        producer.newMessage().transaction(txn).value(value).send();
        txn.commit();
        committed.add(value);
    }

    /** A consumer of one segment (its GET_LAST_MESSAGE_ID is the segment's). */
    org.apache.pulsar.client.api.Consumer<String> segmentConsumer(String segment) throws Exception {
        ConsumerConfigurationData<String> conf = new ConsumerConfigurationData<>();
        conf.getTopicNames().add(segment);
        conf.setSubscriptionName("probe");
        return ((PulsarClientImpl) v4).subscribeSegmentAsync(conf, org.apache.pulsar.client.api.Schema.STRING)
                .get(30, TimeUnit.SECONDS);
    }

    /** A Reader (a non-durable exclusive subscription) of one segment from its first message. */
    org.apache.pulsar.client.api.Reader<String> segmentReader(String segment, int waitS) throws Exception {
        ReaderConfigurationData<String> conf = new ReaderConfigurationData<>();
        conf.setTopicName(segment);
        conf.setStartMessageId(org.apache.pulsar.client.api.MessageId.earliest);
        return ((PulsarClientImpl) v4).createSegmentReaderAsync(conf, org.apache.pulsar.client.api.Schema.STRING)
                .get(waitS, TimeUnit.SECONDS);
    }

    /** Every value fresh Readers of `segments` are given from their first message: each segment read
     *  until `quietMs` pass without a message or `budgetMs` are spent; one that cannot be read is
     *  reported to `out` and the others are read on. */
    Set<String> readValues(List<String> segments, long quietMs, long budgetMs, Out out) {
        Set<String> read = new LinkedHashSet<>();
        for (String segment : segments) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
            try (org.apache.pulsar.client.api.Reader<String> reader = segmentReader(segment, 60)) {
                while (System.nanoTime() < deadline) {
                    org.apache.pulsar.client.api.Message<String> message = reader.readNext((int) quietMs,
                            TimeUnit.MILLISECONDS);
                    if (message == null) {
                        break;
                    }
                    read.add(message.getValue());
                }
            } catch (Exception err) {
                out.error("reading " + segment, err);
            }
        }
        return read;
    }

    /** The address (the broker's advertised service URL) the client's lookup of `topic` connects to. */
    String owner(String topic) throws Exception {
        org.apache.pulsar.client.impl.ClientCnx cnx = ((PulsarClientImpl) v4).getConnection(topic)
                .get(30, TimeUnit.SECONDS);
        java.net.InetSocketAddress address = (java.net.InetSocketAddress) cnx.ctx().channel().remoteAddress();
        return "pulsar://" + address.getHostString() + ":" + address.getPort();
    }
}
