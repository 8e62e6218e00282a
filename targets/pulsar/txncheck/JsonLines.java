// What the Java transaction check (Report.java) and a finding's reproduction (repro/Out.java)
// print alike: one JSON object per line on stdout, written without a JSON library, so a program
// needs nothing but Pulsar's client jars and the JDK. Written by txnbench (not fetched).

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

abstract class JsonLines {
    /** {"kind":"info","name":..,"value":..}: what was set up or seen. */
    void info(String name, Object value) {
        emit("{\"kind\":\"info\",\"name\":" + quote(name) + ",\"value\":" + quote(String.valueOf(value)) + "}");
    }

    /** An exception and its causes, on one line. */
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

    /** Milliseconds since `startNanos` (a System.nanoTime()). */
    static long ms(long startNanos) {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    static String list(Collection<String> values) {
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

    static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
