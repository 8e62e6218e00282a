// The Java transaction check's command line: --service-url U --topic-a T --topic-b T
// --run R [--listener L]. Written by txnbench (not fetched).

import java.util.HashMap;
import java.util.Map;

final class Args {
    final String serviceUrl;
    final String topicA;
    final String topicB;
    final String run;
    final String listener;

    private Args(Map<String, String> values) {
        serviceUrl = required(values, "--service-url");
        topicA = required(values, "--topic-a");
        topicB = required(values, "--topic-b");
        run = required(values, "--run");
        listener = values.get("--listener");
    }

    static Args parse(String[] argv) {
        Map<String, String> values = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            values.put(argv[i], argv[i + 1]);
        }
        return new Args(values);
    }

    private static String required(Map<String, String> values, String name) {
        String value = values.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing " + name);
        }
        return value;
    }

    /** A value unique to this run, so reruns on one cluster never see each other's messages. */
    String value(String name) {
        return run + "/" + name;
    }
}
