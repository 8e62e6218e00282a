// The Java transaction check's output: one JSON object per line on stdout, which
// targets/pulsar/txn_check.py parses and a pytest test asserts (written by JsonLines.java).
// Written by txnbench (not fetched).
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

final class Report extends JsonLines {
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
            emit("{\"kind\":\"step\",\"name\":" + quote(name) + ",\"ok\":true,\"ms\":" + ms(started) + "}");
            return value;
        } catch (Exception | Error err) {
            emit("{\"kind\":\"step\",\"name\":" + quote(name) + ",\"ok\":false,\"ms\":" + ms(started)
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
}
