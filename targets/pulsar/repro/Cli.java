// A finding program's command line: `--name value` pairs, with defaults. Written by txnbench.

import java.util.HashMap;
import java.util.Map;

final class Cli {
    private final Map<String, String> values = new HashMap<>();

    static Cli parse(String[] argv) {
        Cli cli = new Cli();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
            }
            cli.values.put(argv[i], argv[i + 1]);
        }
        if (argv.length % 2 != 0) {
            throw new IllegalArgumentException("no value after " + argv[argv.length - 1]);
        }
        return cli;
    }

    String required(String name) {
        String value = values.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing " + name);
        }
        return value;
    }

    String get(String name, String fallback) {
        String value = values.get(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    int integer(String name, int fallback) {
        return Integer.parseInt(get(name, Integer.toString(fallback)));
    }

    /** A comma-separated list of whole numbers (`--gaps 80,110,140`). */
    long[] longs(String name, String fallback) {
        return java.util.Arrays.stream(get(name, fallback).split(",")).map(String::trim)
                .mapToLong(Long::parseLong).toArray();
    }
}
