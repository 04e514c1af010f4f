// Runs Kafka's own command-line tools (the main classes behind kafka-topics.sh, kafka-configs.sh,
// ...) one after another in this one JVM, so a script of many invocations pays for one JVM
// start-up instead of one each.
//
// Input (stdin): one JSON object a line, {"tool": "<main class>", "args": ["--bootstrap-server", ...]},
// optionally with "until": a regular expression, and "attempts": N: the invocation is run again
// (half a second apart, at most N times) until its stdout matches or it fails, for what Kafka
// finishes in the background (a reassignment that --verify reports in progress).
// Output (stdout): one JSON object a line per invocation, in order:
// {"tool": ..., "args": [...], "exit_code": N, "stdout": "...", "stderr": "..."}.
//
// Faithfulness: each tool's public main(String...) runs exactly as the shell script runs it; only
// Kafka's Exit procedure is replaced (Kafka's own tests do the same), so the tool's System.exit
// becomes an exit code recorded here instead of the end of the JVM. System.out and System.err are
// captured per invocation. Run with: java -cp '<kafka jars>/*' KafkaToolRunner.java
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.kafka.common.utils.internals.Exit;

public class KafkaToolRunner {
    /** Thrown by the replaced exit procedure: unwinds the tool the way exiting would end it. */
    static final class ExitCalled extends Error {
        final int code;

        ExitCalled(int code, String message) {
            super("exit(" + code + ")" + (message == null ? "" : ": " + message));
            this.code = code;
        }
    }

    public static void main(String[] ignored) throws Exception {
        ObjectMapper json = new ObjectMapper();
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        // A tool may catch the unwinding and exit again from its own handler: the first code is
        // the one the process would have ended with.
        int[] firstExit = {Integer.MIN_VALUE};
        Exit.Procedure exit = (code, message) -> {
            if (firstExit[0] == Integer.MIN_VALUE) {
                firstExit[0] = code;
            }
            // The process ends here: whatever the tool's handlers print while the unwinding
            // passes through them would never have been printed.
            System.setOut(new PrintStream(OutputStream.nullOutputStream()));
            System.setErr(new PrintStream(OutputStream.nullOutputStream()));
            throw new ExitCalled(code, message);
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode invocation = json.readTree(line);
            String tool = invocation.get("tool").asText();
            List<String> args = new ArrayList<>();
            invocation.get("args").forEach(arg -> args.add(arg.asText()));
            Pattern until = invocation.has("until") ? Pattern.compile(invocation.get("until").asText()) : null;
            int attempts = invocation.has("attempts") ? invocation.get("attempts").asInt() : 1;
            ObjectNode result = null;
            for (int attempt = 1; attempt <= attempts; attempt++) {
                if (attempt > 1) {
                    Thread.sleep(500);
                }
                result = run(json, tool, args, firstExit, realOut, realErr);
                result.set("args", invocation.get("args"));
                result.put("attempts", attempt);
                // A failure is a final answer: only a run that succeeded is waited on.
                boolean failed = result.get("exit_code").asInt() != 0;
                if (until == null || failed || until.matcher(result.get("stdout").asText()).find()) {
                    break;
                }
            }
            realOut.println(json.writeValueAsString(result));
            realOut.flush();
        }
    }

    /** One run of a tool's main with this JVM's exit, stdout and stderr captured. */
    static ObjectNode run(
            ObjectMapper json, String tool, List<String> args, int[] firstExit, PrintStream realOut, PrintStream realErr)
            throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        firstExit[0] = Integer.MIN_VALUE;
        int exitCode;
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            Method main = Class.forName(tool).getMethod("main", String[].class);
            main.invoke(null, (Object) args.toArray(new String[0]));
            // A main that returns without calling exit ends the process with 0.
            exitCode = firstExit[0] == Integer.MIN_VALUE ? 0 : firstExit[0];
        } catch (InvocationTargetException thrown) {
            Throwable cause = thrown.getCause();
            if (firstExit[0] != Integer.MIN_VALUE) {
                exitCode = firstExit[0];
            } else {
                // An exception out of main: the JVM prints it and exits with 1.
                cause.printStackTrace(System.err);
                exitCode = 1;
            }
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(realOut);
            System.setErr(realErr);
        }
        ObjectNode result = json.createObjectNode();
        result.put("tool", tool);
        result.put("exit_code", exitCode);
        result.put("stdout", out.toString(StandardCharsets.UTF_8));
        result.put("stderr", err.toString(StandardCharsets.UTF_8));
        return result;
    }
}
