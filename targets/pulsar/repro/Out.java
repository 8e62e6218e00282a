// What a finding's reproduction prints: one JSON object per line on stdout, read by
// targets/pulsar/finding.py (and readable by a person), written as the transaction check's are
// (../txncheck/JsonLines.java). Written by txnbench (not fetched).
//
// Lines: {"kind":"info","name":..,"value":..} what was set up or seen;
// {"kind":"ask","action":..,"target":..} a step only the person or harness running the program
// can take (restart or kill a broker): it waits for one line on stdin ("done", or why not);
// {"kind":"try","n":..,"shows":true|false,"summary":..,"examples":[..]} one try's observation;
// {"kind":"error","what":..} why the reproduction could not run;
// {"kind":"done","tries":..,"shown":..} last. Exit status: 1 the bug showed in a try, 0 every
// try ran and it did not, 2 the reproduction could not run.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Collection;

final class Out extends JsonLines {
    private int tries;
    private int shown;
    private boolean failed;
    private final BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    /** One try's observation: `shows` is whether the bug showed in it. */
    void attempt(int n, boolean shows, String summary, Collection<String> examples) {
        tries++;
        if (shows) {
            shown++;
        }
        emit("{\"kind\":\"try\",\"n\":" + n + ",\"shows\":" + shows + ",\"summary\":" + quote(summary)
                + ",\"examples\":" + list(examples) + "}");
    }

    /** The reproduction could not run (a set-up step failed): no verdict. */
    void error(String what, Throwable cause) {
        failed = true;
        emit("{\"kind\":\"error\",\"what\":" + quote(what + (cause == null ? "" : ": " + describe(cause))) + "}");
    }

    /** Asks whoever runs the program to do `action` to `target`; true once they answer "done". */
    boolean ask(String action, String target, String how) {
        emit("{\"kind\":\"ask\",\"action\":" + quote(action) + ",\"target\":" + quote(target) + ",\"how\":"
                + quote(how) + "}");
        try {
            String answer = stdin.readLine();
            info("answer to " + action, answer);
            return answer != null && answer.trim().equals("done");
        } catch (java.io.IOException err) {
            info("answer to " + action, describe(err));
            return false;
        }
    }

    /** A finding program: what `run` builds from the command line and runs. */
    interface Program {
        Out out();

        void runAll() throws Exception;
    }

    /** Every finding program's `main`: build it from `argv` (bad arguments: an error line, exit 2),
     *  run it (an exception: an error line), then exit with what its `Out` says. */
    static void run(String[] argv, java.util.function.Function<Cli, Program> make) {
        Program program;
        try {
            program = make.apply(Cli.parse(argv));
        } catch (RuntimeException err) {
            new Out().error("bad arguments", err);
            System.exit(2);
            return;
        }
        try {
            program.runAll();
        } catch (Exception err) {
            program.out().error("the reproduction stopped", err);
        }
        System.exit(program.out().finish());
    }

    /** The last line; the exit status the program should end with. */
    int finish() {
        emit("{\"kind\":\"done\",\"tries\":" + tries + ",\"shown\":" + shown + "}");
        if (shown > 0) {
            return 1;
        }
        return failed || tries == 0 ? 2 : 0;
    }

    /** Thread.sleep that keeps the interrupt flag instead of throwing. */
    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException err) {
            Thread.currentThread().interrupt();
        }
    }

    /** `text` on one line, at most 300 characters: an error inside a report line. */
    static String trim(String text) {
        String flat = text.replaceAll("\\s+", " ");
        return flat.length() > 300 ? flat.substring(0, 300) + "..." : flat;
    }
}
