// The transaction scenario the Java check runs, the same on every path and target; the client
// API it drives (Pulsar's v4 API, or the v5 API of scalable topics) is behind `Api`.
// Written by txnbench (not fetched).
//
// What it checks, each with ordinary (non-transactional) reads:
//  1. t1 produces to topics A and B and commits; t2 produces to both and aborts: a durable
//     subscription made before delivers t1's values once and t2's never; readers from the
//     start see t1's values exactly once and t2's never.
//  2. t3 acknowledges one of t1's messages and produces to B, then commits; t4 acknowledges
//     the other and produces to B, then aborts. After the consumer is closed and the
//     subscription opened again, only t4's acknowledged message is delivered again (a
//     committed ack is never redelivered, an aborted one is); B shows t3's value, never t4's.
//  3. t5, with a 2 s timeout, produces to A and is left open; t6 produces to A after it and
//     commits. The broker must abort t5 when it times out: t6's value then becomes
//     readable (on v4 an open transaction holds back what follows it), t5's never.

import java.util.ArrayList;
import java.util.List;

final class Scenario {
    /** How long a receive waits for a message that should come, and for one that should not. */
    static final long EXPECT_MS = 15_000;
    static final long QUIET_MS = 1_000;
    static final int MAX_MESSAGES = 50;

    interface Txn {
        void commit() throws Exception;

        void abort() throws Exception;
    }

    interface Received {
        String value();
    }

    interface Sub {
        /** The next message, or null after `timeoutMs`. */
        Received receive(long timeoutMs) throws Exception;

        /** Acknowledges `message` in `txn`, waiting until the ack is registered with it. */
        void ack(Received message, Txn txn) throws Exception;

        void close() throws Exception;
    }

    /** The timeout of the transaction that is left open (t5). */
    static final long SHORT_TIMEOUT_MS = 2_000;

    /** A client API on one cluster; closing it closes its clients. */
    interface Api extends AutoCloseable {
        Txn newTxn() throws Exception;

        /** A transaction the coordinator times out after `SHORT_TIMEOUT_MS`. */
        Txn newShortTxn() throws Exception;

        void send(String topic, String key, String value, Txn txn) throws Exception;

        /** A shared (queue) subscription, positioned at the earliest message when created. */
        Sub subscribe(String topic, String subscription) throws Exception;

        /** Every value of `topic` from its start, read until `expected` came and then until quiet
         *  (no ack, no transaction). */
        List<String> readAll(String topic, String reader, int expected) throws Exception;
    }

    /** Connects to the cluster `args` names, reporting each client it builds as a step. */
    interface Connect {
        Api connect(Args args, Report report) throws Exception;
    }

    private final Api api;
    private final Args args;
    private final Report report;

    /** A check's `main`: the `api` line, the connection, the scenario, then exit 0 only when
     *  every check passed (a failed step or an error ends it with the `done` line, exit 1). */
    static void main(String[] argv, String apiName, Connect connect) {
        Report report = new Report();
        int status = 1;
        try {
            Args args = Args.parse(argv);
            report.info("api", apiName);
            try (Api api = connect.connect(args, report)) {
                new Scenario(api, args, report).run();
            }
            status = report.finish();
        } catch (Report.StepFailed failed) {
            report.finish();
        } catch (Exception err) {
            report.info("error", Report.describe(err));
            report.finish();
        }
        System.exit(status);
    }

    Scenario(Api api, Args args, Report report) {
        this.api = api;
        this.args = args;
        this.report = report;
    }

    void run() throws Report.StepFailed {
        String a = args.topicA;
        String b = args.topicB;
        Sub work = report.step("subscribe work on A", () -> api.subscribe(a, "work"));

        Txn t1 = report.step("open t1", api::newTxn);
        send(a, "k1", "c1-a1", t1, "t1");
        send(a, "k2", "c1-a2", t1, "t1");
        send(b, "k1", "c1-b1", t1, "t1");
        Txn t2 = report.step("open t2", api::newTxn);
        send(a, "k1", "x2-a1", t2, "t2");
        send(b, "k2", "x2-b1", t2, "t2");
        report.step("commit t1", () -> { t1.commit(); return null; });
        report.step("abort t2", () -> { t2.abort(); return null; });

        List<Received> delivered = receive(work, 2, "receive t1's values on work");
        List<String> seen = values(delivered);
        report.checkExactly("work delivers t1's committed values once and t2's aborted ones never",
                List.of(v("c1-a1"), v("c1-a2")), seen);
        Received first = find(delivered, v("c1-a1"));
        Received second = find(delivered, v("c1-a2"));
        if (first == null || second == null) {
            return;   // the ack part needs both messages; the check above has failed already
        }

        Txn t3 = report.step("open t3", api::newTxn);
        report.step("ack c1-a1 in t3", () -> { work.ack(first, t3); return null; });
        send(b, "k3", "c3-b1", t3, "t3");
        report.step("commit t3", () -> { t3.commit(); return null; });
        Txn t4 = report.step("open t4", api::newTxn);
        report.step("ack c1-a2 in t4", () -> { work.ack(second, t4); return null; });
        send(b, "k4", "x4-b1", t4, "t4");
        report.step("abort t4", () -> { t4.abort(); return null; });
        report.step("close work", () -> { work.close(); return null; });

        Sub again = report.step("subscribe work on A again", () -> api.subscribe(a, "work"));
        List<Received> redelivered = receive(again, 1, "receive what work still holds");
        report.checkExactly("after t3 commits its ack and t4 aborts its ack, only t4's message is delivered again",
                List.of(v("c1-a2")), values(redelivered));
        report.step("close work again", () -> { again.close(); return null; });

        Txn t5 = report.step("open t5 (2 s timeout)", api::newShortTxn);
        send(a, "k5", "x5-a1", t5, "t5");
        Txn t6 = report.step("open t6", api::newTxn);
        send(a, "k6", "c6-a1", t6, "t6");
        report.step("commit t6", () -> { t6.commit(); return null; });

        List<String> readA = report.step("read A from the start", () -> api.readAll(a, "read-a", 3));
        List<String> readB = report.step("read B from the start", () -> api.readAll(b, "read-b", 2));
        report.checkExactly("A reads t1's and t6's committed values exactly once (t5 timed out, aborted)",
                List.of(v("c1-a1"), v("c1-a2"), v("c6-a1")), readA);
        report.checkExactly("B reads t1's and t3's committed values exactly once", List.of(v("c1-b1"), v("c3-b1")),
                readB);
        List<String> everything = new ArrayList<>(readA);
        everything.addAll(readB);
        everything.addAll(seen);
        everything.addAll(values(redelivered));
        report.checkNone("aborted values (t2's, t4's, timed-out t5's) are never delivered or read",
                List.of(v("x2-a1"), v("x2-b1"), v("x4-b1"), v("x5-a1")), everything);
        String late = report.step("commit t5 after its timeout", () -> {
            try {
                t5.commit();
                return "";
            } catch (Exception err) {
                return Report.describe(err);
            }
        });
        report.info("commit of timed-out t5", late);
        report.checkExactly("a commit after the timeout fails", List.of("failed"), List.of(late.isEmpty() ? "committed" : "failed"));
    }

    private String v(String name) {
        return args.value(name);
    }

    private void send(String topic, String key, String name, Txn txn, String txnName) throws Report.StepFailed {
        report.step("send " + name + " in " + txnName, () -> { api.send(topic, key, v(name), txn); return null; });
    }

    /** Receives until `expected` messages came, then until quiet (to see extra ones), bounded. */
    private List<Received> receive(Sub sub, int expected, String name) throws Report.StepFailed {
        return report.step(name, () -> {
            List<Received> out = new ArrayList<>();
            for (int i = 0; i < MAX_MESSAGES; i++) {
                Received message = sub.receive(out.size() < expected ? EXPECT_MS : QUIET_MS);
                if (message == null) {
                    break;
                }
                out.add(message);
            }
            return out;
        });
    }

    private static List<String> values(List<Received> messages) {
        List<String> out = new ArrayList<>();
        for (Received message : messages) {
            out.add(message.value());
        }
        return out;
    }

    private static Received find(List<Received> messages, String value) {
        for (Received message : messages) {
            if (message.value().equals(value)) {
                return message;
            }
        }
        return null;
    }
}
