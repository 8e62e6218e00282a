// The Java transaction check's output: one JSON object per line on stdout, which
// targets/pulsar/txn_check.py parses and a pytest test asserts. Written by txnbench (not
// fetched); no JSON library, so the program needs nothing but the Pulsar client's jars.
//
// Lines: {"kind":"step","name":..,"ok":true,"ms":..} for every client call the check makes (a
// failed one carries "error" and ends the check: later steps depend on it);
// {"kind":"check","name":..,"ok":..,"expected":[..],"got":[..]} for every expectation;
// {"kind":"done","checks":n,"failed":k} last. Exit status 0 only when every check passed.

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

final class Report {
    private int checks;
    private int failed;

    /** A step that failed: the check cannot go on. */
    static final class StepFailed extends Exception {
        StepFailed(String step, Throwable cause) {
            super(step, cause);
        }
    }

    interface Call<T> {
        T call() throws Exception;
    }

    /** Runs one client call, reports it, and turns its failure into StepFailed. */
    <T> T step(String name, Call<T> call) throws StepFailed {
        long started = System.nanoTime();
        try {
            T value = call.call();
            emit("{\"kind\":\"step\",\"name\":" + quote(name) + ",\"ok\":true,\"ms\":" + millis(started) + "}");
            return value;
        } catch (Exception | Error err) {
            emit("{\"kind\":\"step\",\"name\":" + quote(name) + ",\"ok\":false,\"ms\":" + millis(started)
                    + ",\"error\":" + quote(describe(err)) + "}");
            throw new StepFailed(name, err);
        }
    }

    /** An expectation on multisets of values: `got` must equal `expected`, counts included. */
    void checkExactly(String name, Collection<String> expected, Collection<String> got) {
        boolean ok = counts(expected).equals(counts(got));
        record(name, ok, expected, got);
    }

    /** None of `forbidden` may be in `got`. */
    void checkNone(String name, Collection<String> forbidden, Collection<String> got) {
        List<String> seen = new ArrayList<>();
        for (String value : got) {
            if (forbidden.contains(value)) {
                seen.add(value);
            }
        }
        record(name, seen.isEmpty(), List.of(), seen);
    }

    void info(String name, String value) {
        emit("{\"kind\":\"info\",\"name\":" + quote(name) + ",\"value\":" + quote(value) + "}");
    }

    int finish() {
        emit("{\"kind\":\"done\",\"checks\":" + checks + ",\"failed\":" + failed + "}");
        return failed == 0 && checks > 0 ? 0 : 1;
    }

    private void record(String name, boolean ok, Collection<String> expected, Collection<String> got) {
        checks++;
        if (!ok) {
            failed++;
        }
        emit("{\"kind\":\"check\",\"name\":" + quote(name) + ",\"ok\":" + ok + ",\"expected\":" + list(expected)
                + ",\"got\":" + list(got) + "}");
    }

    private static Map<String, Integer> counts(Collection<String> values) {
        Map<String, Integer> out = new TreeMap<>();
        for (String value : values) {
            out.merge(value, 1, Integer::sum);
        }
        return out;
    }

    static String describe(Throwable err) {
        StringBuilder out = new StringBuilder();
        for (Throwable t = err; t != null && out.length() < 1500; t = t.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(t.getClass().getName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return out.toString();
    }

    private static long millis(long started) {
        return (System.nanoTime() - started) / 1_000_000;
    }

    private static String list(Collection<String> values) {
        List<String> quoted = new ArrayList<>();
        for (String value : values) {
            quoted.add(quote(value));
        }
        return "[" + String.join(",", quoted) + "]";
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : String.valueOf(text).toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
