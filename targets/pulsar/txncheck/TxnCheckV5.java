// The Java transaction check on Pulsar 5's client API for scalable topics
// (org.apache.pulsar.client.api.v5, `pulsar-client-v5`): topic:// topics, the v5 path.
// Written by txnbench (not fetched).

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.PulsarClientBuilder;
import org.apache.pulsar.client.api.v5.QueueConsumer;
import org.apache.pulsar.client.api.v5.Transaction;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.config.TransactionPolicy;
import org.apache.pulsar.client.api.v5.schema.Schema;

public final class TxnCheckV5 {
    private TxnCheckV5() {
    }

    public static void main(String[] argv) {
        Scenario.main(argv, "v5 " + PulsarClient.class.getPackage().getImplementationVersion(), (args, report) -> {
            PulsarClient client = report.step("connect", () -> client(args, Duration.ofMinutes(2)));
            // the v5 API sets the transaction timeout per client: a second one for t5
            return new V5(client, report.step("connect (short transaction timeout)",
                    () -> client(args, Duration.ofMillis(Scenario.SHORT_TIMEOUT_MS))));
        });
    }

    private static PulsarClient client(Args args, Duration transactionTimeout) throws Exception {
        PulsarClientBuilder builder = PulsarClient.builder().serviceUrl(args.serviceUrl)
                .operationTimeout(Duration.ofSeconds(30))
                .transactionPolicy(TransactionPolicy.builder().timeout(transactionTimeout).build());
        if (args.listener != null) {
            builder.listenerName(args.listener);
        }
        return builder.build();
    }

    private record Txn(Transaction txn) implements Scenario.Txn {
        @Override
        public void commit() throws Exception {
            txn.commit();
        }

        @Override
        public void abort() throws Exception {
            txn.abort();
        }
    }

    private record Received(Message<String> message) implements Scenario.Received {
        @Override
        public String value() {
            return message.value();
        }
    }

    private record Sub(QueueConsumer<String> consumer) implements Scenario.Sub {
        @Override
        public Scenario.Received receive(long timeoutMs) throws Exception {
            Message<String> message = consumer.receive(Duration.ofMillis(timeoutMs));
            return message == null ? null : new Received(message);
        }

        @Override
        public void ack(Scenario.Received message, Scenario.Txn txn) throws Exception {
            consumer.acknowledge(((Received) message).message().id(), ((Txn) txn).txn());
        }

        @Override
        public void close() throws Exception {
            consumer.close();
        }
    }

    private static final class V5 implements Scenario.Api {
        private final PulsarClient client;
        private final PulsarClient shortClient;
        private final Map<String, Producer<String>> producers = new HashMap<>();

        V5(PulsarClient client, PulsarClient shortClient) {
            this.client = client;
            this.shortClient = shortClient;
        }

        @Override
        public void close() throws Exception {
            shortClient.shutdown();
            client.shutdown();
        }

        @Override
        public Scenario.Txn newTxn() throws Exception {
            return new Txn(client.newTransaction());
        }

        @Override
        public Scenario.Txn newShortTxn() throws Exception {
            return new Txn(shortClient.newTransaction());
        }

        @Override
        public void send(String topic, String key, String value, Scenario.Txn txn) throws Exception {
            Producer<String> producer = producers.get(topic);
            if (producer == null) {
                producer = client.newProducer(Schema.string()).topic(topic).sendTimeout(Duration.ofSeconds(60))
                        .create();
                producers.put(topic, producer);
            }
            producer.newMessage().transaction(((Txn) txn).txn()).key(key).value(value).send();
        }

        @Override
        public Scenario.Sub subscribe(String topic, String subscription) throws Exception {
            return new Sub(client.newQueueConsumer(Schema.string()).topic(topic).subscriptionName(subscription)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST).subscribe());
        }

        @Override
        public List<String> readAll(String topic, String name, int expected) throws Exception {
            // a queue consumer on a new subscription from the earliest message, never acknowledging:
            // a stream consumer would need SCALABLE_TOPIC_SUBSCRIBE (controller-assigned segments),
            // which the embedded broker does not implement (embedded/broker/v5/README.md)
            List<String> out = new ArrayList<>();
            try (QueueConsumer<String> reader = client.newQueueConsumer(Schema.string()).topic(topic)
                    .subscriptionName(name).subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
                    .subscribe()) {
                for (int i = 0; i < Scenario.MAX_MESSAGES; i++) {
                    long wait = out.size() < expected ? Scenario.EXPECT_MS : Scenario.QUIET_MS;
                    Message<String> message = reader.receive(Duration.ofMillis(wait));
                    if (message == null) {
                        break;
                    }
                    out.add(message.value());
                }
            }
            return out;
        }
    }
}
