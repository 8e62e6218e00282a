// The two clients a v5 reproduction needs, built one way for every V5 program: the v5 API's
// client (transactions, producers, queue consumers on topic://) and the v4 client beside it
// (PulsarClientImpl's segment methods, which the v5 client itself uses underneath). Both go
// through the given advertised listener when one is named (the pulsar target's clients dial
// through Toxiproxy on the `external` listener). Written by txnbench.

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.PulsarClientBuilder;
import org.apache.pulsar.client.api.v5.config.TransactionPolicy;

final class V5Clients {
    final PulsarClient client;
    final org.apache.pulsar.client.api.PulsarClient v4;

    private V5Clients(PulsarClient client, org.apache.pulsar.client.api.PulsarClient v4) {
        this.client = client;
        this.v4 = v4;
    }

    static V5Clients connect(String service, String listener) throws Exception {
        PulsarClientBuilder builder = PulsarClient.builder().serviceUrl(service)
                .operationTimeout(Duration.ofSeconds(30))
                .transactionPolicy(TransactionPolicy.builder().timeout(Duration.ofMinutes(2)).build());
        org.apache.pulsar.client.api.ClientBuilder v4Builder = org.apache.pulsar.client.api.PulsarClient.builder()
                .serviceUrl(service).operationTimeout(30, TimeUnit.SECONDS);
        if (listener != null) {
            builder.listenerName(listener);
            v4Builder.listenerName(listener);
        }
        return new V5Clients(builder.build(), v4Builder.build());
    }
}
