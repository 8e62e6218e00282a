// txnbench: a coverage dump server inside a covered JVM, beside JaCoCo's agent.
//
// Started as a second -javaagent after JaCoCo's own (`-javaagent:jacocoagent.jar=output=none,...
// -javaagent:txnbench-dump.jar=127.0.0.1:<port>`; targets/pulsar/jacoco.py). A client connects,
// sends one byte (1: reset the counts after reading them, 0: keep them) and reads JaCoCo's
// execution data, an .exec file's bytes, to the end of the stream.
//
// Why not JaCoCo's own `output=tcpserver`: its server closes in JaCoCo's shutdown hook, which runs
// beside Pulsar's, so whatever a broker runs while it shuts down gracefully (unloading its topics
// and coordinators) could not be dumped. This server is a daemon thread, not a hook: it answers
// until the JVM halts, and `output=none` gives JaCoCo nothing to do at exit.

import java.io.InputStream;
import java.io.OutputStream;
import java.lang.instrument.Instrumentation;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import org.jacoco.agent.rt.IAgent;
import org.jacoco.agent.rt.RT;

public final class DumpServer {
    private DumpServer() {
    }

    public static void premain(String args, Instrumentation instrumentation) throws Exception {
        int colon = args.lastIndexOf(':');
        InetAddress host = InetAddress.getByName(args.substring(0, colon));
        int port = Integer.parseInt(args.substring(colon + 1));
        IAgent agent = RT.getAgent();   // JaCoCo's agent started first: fails the JVM's start if it did not
        ServerSocket server = new ServerSocket(port, 16, host);   // a taken port fails the start too
        Thread thread = new Thread(() -> serve(server, agent), "txnbench-coverage-dump");
        thread.setDaemon(true);
        thread.start();
    }

    private static void serve(ServerSocket server, IAgent agent) {
        while (true) {
            try (Socket socket = server.accept()) {
                socket.setSoTimeout(10_000);
                InputStream in = socket.getInputStream();
                int reset = in.read();
                if (reset < 0) {
                    continue;
                }
                byte[] data = agent.getExecutionData(reset == 1);
                OutputStream out = socket.getOutputStream();
                out.write(data);
                out.flush();
            } catch (Throwable error) {
                if (server.isClosed()) {
                    return;
                }
            }
        }
    }
}
