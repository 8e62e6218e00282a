// Pulsar's admin REST API over the JDK's HTTP client: the calls `pulsar-admin` makes, by path
// (each method names its pulsar-admin equivalent), so a finding program needs no admin jar.
// Redirects to a bundle's owner are followed (307 keeps the method). Written by txnbench.

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

final class Admin {
    private final String base;
    private final HttpClient http = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NORMAL)
            .connectTimeout(Duration.ofSeconds(10)).build();

    Admin(String base) {
        this.base = base.endsWith("/") ? base.substring(0, base.length() - 1) : base;
    }

    /** An answer that is not 2xx. */
    static final class Failed extends Exception {
        final int status;

        Failed(String what, int status, String body) {
            super(what + ": HTTP " + status + " " + body);
            this.status = status;
        }
    }

    String get(String path) throws Exception {
        return call("GET", path, null);
    }

    String put(String path, String json) throws Exception {
        return call("PUT", path, json);
    }

    String call(String method, String path, String json) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(60))
                .header("Accept", "application/json");
        if (json != null) {
            request.header("Content-Type", "application/json");
        }
        request.method(method, json == null ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofString(json));
        HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() / 100 != 2) {
            // a redirect still answered after the client's limit of them (5): where it last pointed
            String to = response.statusCode() / 100 == 3 ? response.headers().firstValue("Location")
                    .map(location -> "(from " + response.uri() + " redirected to " + location + ") ").orElse("") : "";
            throw new Failed(method + " " + path, response.statusCode(), to + response.body());
        }
        return response.body();
    }

    /** `pulsar-admin namespaces create public/NS --bundles N`, then `pulsar-admin namespaces
     *  set-retention public/NS --time -1 --size -1`: a message nobody subscribed to stays readable
     *  (without it the ledgers a topic closes when it moves are trimmed, and their messages with them) */
    void createNamespace(String namespace, int bundles) throws Exception {
        put("/admin/v2/namespaces/" + namespace, "{\"bundles\":{\"numBundles\":" + bundles + "},"
                + "\"retention_policies\":{\"retentionTimeInMinutes\":-1,\"retentionSizeInMB\":-1}}");
    }

    /** `pulsar-admin topics create-partitioned-topic persistent://NS/T -p N` */
    void createPartitionedTopic(String namespace, String topic, int partitions) throws Exception {
        put("/admin/v2/persistent/" + namespace + "/" + topic + "/partitions", Integer.toString(partitions));
    }

    /** A scalable (v5) topic public/default/LOCAL of `segments` segments */
    void createScalableTopic(String local, int segments) throws Exception {
        put("/admin/v2/scalable/public/default/" + local + "?numInitialSegments=" + segments, null);
    }

    /** The segment:// name of a scalable topic's one segment: `<start>-<end>-<id>` from its layout
     *  when it spells it so, else the whole hash range's first segment, 0000-ffff-0. */
    String firstSegment(String local) throws Exception {
        Matcher m = Pattern.compile("\\b([0-9a-f]{4}-[0-9a-f]{4}-\\d+)\\b")
                .matcher(get("/admin/v2/scalable/public/default/" + local));
        return "segment://public/default/" + local + "/" + (m.find() ? m.group(1) : "0000-ffff-0");
    }

    /** `pulsar-admin namespaces unload public/NS` (every bundle of it) */
    void unloadNamespace(String namespace) throws Exception {
        put("/admin/v2/namespaces/" + namespace + "/unload", null);
    }

    /** `pulsar-admin topics unload persistent://NS/T`: the topic's own close (its bundle stays owned) */
    void unloadTopic(String namespace, String topic) throws Exception {
        put("/admin/v2/persistent/" + namespace + "/" + topic + "/unload", null);
    }

    /** `pulsar-admin topics lookup persistent://NS/T`: the owner's HTTP URL, or "" */
    String ownerHttpUrl(String namespace, String topic) throws Exception {
        return field(get("/lookup/v2/topic/persistent/" + namespace + "/" + topic), "httpUrl");
    }

    /** Moves a namespace's topics: unloads it, or (`fault` "restart") has the harness restart the
     *  broker serving `owner` gracefully; says what was done. */
    String move(Out out, String fault, String namespace, String owner) {
        if ("restart".equals(fault)) {
            return out.ask("restart-broker", owner, "restart the broker serving " + owner
                    + " gracefully (SIGTERM, wait until it is gone, start it again), then answer `done`")
                    ? "restart of " + owner : "restart of " + owner + " NOT done";
        }
        try {
            unloadNamespace(namespace);
            return "unload";
        } catch (Exception err) {
            return "unload failed: " + Out.trim(Out.describe(err));
        }
    }

    /** `ownerHttpUrl`, or "? (why)" when the lookup fails. */
    String ownerOrWhy(String namespace, String topic) {
        try {
            return ownerHttpUrl(namespace, topic);
        } catch (Exception err) {
            return "? (" + Out.describe(err) + ")";
        }
    }

    /** `pulsar-admin transactions transaction-metadata -m M -l L` (raw JSON; "" when it fails) */
    String transactionMetadata(long most, long least) {
        try {
            return get("/admin/v3/transactions/transactionMetadata/" + most + "/" + least);
        } catch (Exception err) {
            return Out.describe(err);
        }
    }

    /** `pulsar-admin transactions transaction-in-buffer-stats -t persistent://NS/T -m M -l L` */
    String transactionInBuffer(String namespace, String topic, long most, long least) {
        try {
            return get("/admin/v3/transactions/transactionInBufferStats/" + namespace + "/" + topic + "/"
                    + most + "/" + least);
        } catch (Exception err) {
            return Out.describe(err);
        }
    }

    /** `pulsar-admin topics stats-internal persistent://NS/T` (raw JSON), "" when it fails */
    String internalStats(String namespace, String topic) {
        try {
            return get("/admin/v2/persistent/" + namespace + "/" + topic + "/internalStats");
        } catch (Exception err) {
            return "";
        }
    }

    /** `pulsar-admin transactions transaction-buffer-stats -t persistent://NS/T` (raw JSON, or why not) */
    String transactionBufferStats(String namespace, String topic) {
        try {
            return get("/admin/v3/transactions/transactionBufferStats/" + namespace + "/" + topic);
        } catch (Exception err) {
            return Out.describe(err);
        }
    }

    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        return m.find() ? m.group(1) : "";
    }
}
