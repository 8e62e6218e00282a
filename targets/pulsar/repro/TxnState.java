// How a finding program reads the admin API's answer to "what state is transaction T in"
// (`pulsar-admin transactions transaction-metadata`): its JSON, or Admin's failure text.
// Written by txnbench.
//
// Why a class of its own: a failed question is not an answer. On 3.0.0 the broker named as the
// coordinator's owner redirected the question to itself until the client gave up (HTTP 307, five
// times, all in its own request log), and the program read that failure as "T ended" while the
// topic's later message went to no reader.

import java.util.List;

final class TxnState {
    private static final List<String> UNFINISHED = List.of("OPEN", "COMMITTING", "ABORTING", "TIME_OUT");
    private static final List<String> ENDED = List.of("COMMITTED", "ABORTED");

    private TxnState() {
    }

    /** The coordinator named a state that is no end. */
    static boolean unfinished(String answer) {
        return UNFINISHED.stream().anyMatch(state -> answer.contains("\"" + state + "\""));
    }

    /** Known to have ended: committed, aborted, or gone from its coordinator (HTTP 404). */
    static boolean ended(String answer) {
        return answer.contains("HTTP 404") || ENDED.stream().anyMatch(state -> answer.contains("\"" + state + "\""));
    }

    /** T held its partition's readers: unfinished, or not known to have ended while the message
     *  sent after it (without a transaction, acknowledged) went unread. */
    static boolean heldReaders(String answer, boolean laterMessageRead) {
        return unfinished(answer) || (!ended(answer) && !laterMessageRead);
    }
}
