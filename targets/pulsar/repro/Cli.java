// A finding program's command line: `--name value` pairs, with defaults. Written by txnbench.

import java.util.HashMap;
import java.util.Map;

final class Cli {
    private final Map<String, String> values = new HashMap<>();
    // The default each option was first read with: a program and a helper that read one option with
    // two defaults disagree about its value when it is not given (a program once planned its reads
    // for a 20 s transaction timeout while its client used 120 s), so the second read is refused.
    private final Map<String, String> defaults = new HashMap<>();

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
        String before = defaults.putIfAbsent(name, String.valueOf(fallback));
        if (before != null && !before.equals(String.valueOf(fallback))) {
            throw new IllegalStateException(name + " is read with two defaults, " + before + " and " + fallback
                    + ": give one default to both readers");
        }
        String value = values.get(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    int integer(String name, int fallback) {
        return Integer.parseInt(get(name, Integer.toString(fallback)));
    }

    /** A whole number of 0 or more (a wait, a length); anything else is refused naming the option. */
    int nonNegative(String name, int fallback) {
        String value = get(name, Integer.toString(fallback));
        try {
            int parsed = Integer.parseInt(value.trim());
            if (parsed >= 0) {
                return parsed;
            }
        } catch (NumberFormatException notANumber) {
            // refused below, with the option's name
        }
        throw new IllegalArgumentException(name + " must be a whole number of 0 or more, got " + value);
    }

    /** A comma-separated list of whole numbers (`--gaps 80,110,140`). */
    long[] longs(String name, String fallback) {
        return java.util.Arrays.stream(get(name, fallback).split(",")).map(String::trim)
                .mapToLong(Long::parseLong).toArray();
    }
}
