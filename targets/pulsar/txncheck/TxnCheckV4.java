// The Java transaction check on Pulsar's v4 client API (org.apache.pulsar.client.api):
// persistent:// topics, the v4 and v4-batched paths. Written by txnbench (not fetched).

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
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

public final class TxnCheckV4 {
    private TxnCheckV4() {
    }

    public static void main(String[] argv) {
        Scenario.main(argv, "v4 " + PulsarClient.class.getPackage().getImplementationVersion(), (args, report) -> {
            ClientBuilder builder = PulsarClient.builder().serviceUrl(args.serviceUrl).enableTransaction(true)
                    .operationTimeout(30, TimeUnit.SECONDS);
            if (args.listener != null) {
                builder.listenerName(args.listener);
            }
            return new V4(report.step("connect (transaction coordinators)", builder::build));
        });
    }

    private record Txn(Transaction txn) implements Scenario.Txn {
        @Override
        public void commit() throws Exception {
            txn.commit().get(60, TimeUnit.SECONDS);
        }

        @Override
        public void abort() throws Exception {
            txn.abort().get(60, TimeUnit.SECONDS);
        }
    }

    private record Received(Message<String> message) implements Scenario.Received {
        @Override
        public String value() {
            return message.getValue();
        }
    }

    private record Sub(Consumer<String> consumer) implements Scenario.Sub {
        @Override
        public Scenario.Received receive(long timeoutMs) throws Exception {
            Message<String> message = consumer.receive((int) timeoutMs, TimeUnit.MILLISECONDS);
            return message == null ? null : new Received(message);
        }

        @Override
        public void ack(Scenario.Received message, Scenario.Txn txn) throws Exception {
            consumer.acknowledgeAsync(((Received) message).message().getMessageId(), ((Txn) txn).txn())
                    .get(60, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws Exception {
            consumer.close();
        }
    }

    private static final class V4 implements Scenario.Api {
        private final PulsarClient client;
        private final java.util.Map<String, Producer<String>> producers = new java.util.HashMap<>();

        V4(PulsarClient client) {
            this.client = client;
        }

        @Override
        public void close() throws Exception {
            client.close();
        }

        @Override
        public Scenario.Txn newTxn() throws Exception {
            return new Txn(client.newTransaction().withTransactionTimeout(2, TimeUnit.MINUTES).build()
                    .get(60, TimeUnit.SECONDS));
        }

        @Override
        public Scenario.Txn newShortTxn() throws Exception {
            return new Txn(client.newTransaction().withTransactionTimeout(Scenario.SHORT_TIMEOUT_MS, TimeUnit.MILLISECONDS)
                    .build().get(60, TimeUnit.SECONDS));
        }

        @Override
        public void send(String topic, String key, String value, Scenario.Txn txn) throws Exception {
            Producer<String> producer = producers.get(topic);
            if (producer == null) {
                producer = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                        .sendTimeout(60, TimeUnit.SECONDS).create();
                producers.put(topic, producer);
            }
            producer.newMessage(((Txn) txn).txn()).key(key).value(value).sendAsync().get(60, TimeUnit.SECONDS);
        }

        @Override
        public Scenario.Sub subscribe(String topic, String subscription) throws Exception {
            return new Sub(client.newConsumer(Schema.STRING).topic(topic).subscriptionName(subscription)
                    .subscriptionType(SubscriptionType.Shared)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        }

        @Override
        public List<String> readAll(String topic, String name, int expected) throws Exception {
            List<String> out = new ArrayList<>();
            try (Reader<String> reader = client.newReader(Schema.STRING).topic(topic).readerName(name)
                    .startMessageId(MessageId.earliest).create()) {
                for (int i = 0; i < Scenario.MAX_MESSAGES; i++) {
                    long wait = out.size() < expected ? Scenario.EXPECT_MS : Scenario.QUIET_MS;
                    Message<String> message = reader.readNext((int) wait, TimeUnit.MILLISECONDS);
                    if (message == null) {
                        break;
                    }
                    out.add(message.getValue());
                }
            }
            return out;
        }
    }
}
