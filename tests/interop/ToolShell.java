// Runs Kafka tool main classes one after another in one JVM, so a test pays the JVM's start-up
// and class loading once instead of once per command (seconds each on a loaded 2-core machine).
//
// Protocol on stdin/stdout, one line each way per command:
//   in:  a tab-separated line: main class, then its arguments (none may contain a tab or newline)
//   out: "@@TOOL-RESULT@@ <exit code> <stdout bytes> <stderr bytes>" then both outputs, raw.
// A tool ends by returning from main (exit code 0), by throwing (exit code 1, as the JVM's), or by
// Kafka's Exit.exit(code), which is turned into an exception here rather than ending the JVM.
// Some tools call Exit.exit inside a catch-all that would then print the exception and exit
// again; in a JVM of their own the first call ends everything, so here the first call's code is
// the exit code and what the tool printed after it is dropped.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.apache.kafka.common.utils.Exit;

public class ToolShell {
    static final class Exited extends RuntimeException {
        final int code;

        Exited(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    private static Integer firstExit;
    private static ByteArrayOutputStream toolOut;
    private static ByteArrayOutputStream toolErr;
    private static int outAtExit;
    private static int errAtExit;

    private static synchronized void exited(int code) {
        if (firstExit == null) {
            firstExit = code;
            System.out.flush();
            System.err.flush();
            outAtExit = toolOut.size();
            errAtExit = toolErr.size();
        }
        throw new Exited(code);
    }

    public static void main(String[] ignored) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        Exit.setExitProcedure((code, message) -> exited(code));
        Exit.setHaltProcedure((code, message) -> exited(code));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split("\t", -1);
            synchronized (ToolShell.class) {
                firstExit = null;
                toolOut = new ByteArrayOutputStream();
                toolErr = new ByteArrayOutputStream();
            }
            System.setOut(new PrintStream(toolOut, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(toolErr, true, StandardCharsets.UTF_8));
            int code = 0;
            try {
                Method main = Class.forName(words[0]).getMethod("main", String[].class);
                Object[] arguments = {Arrays.copyOfRange(words, 1, words.length)};
                // Scala's println writes to Console.out, which holds the System.out of its first use.
                Object[] thrownByMain = {null};
                scala.Console.withOut(System.out, () -> scala.Console.withErr(System.err, () -> {
                    try {
                        main.invoke(null, arguments);
                    } catch (ReflectiveOperationException thrown) {
                        thrownByMain[0] = thrown;
                    }
                    return null;
                }));
                if (thrownByMain[0] != null) {
                    throw (ReflectiveOperationException) thrownByMain[0];
                }
            } catch (InvocationTargetException thrown) {
                code = exitCode(thrown.getCause());
            } catch (Throwable thrown) {
                thrown.printStackTrace();
                code = 1;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            byte[] stdout;
            byte[] stderr;
            synchronized (ToolShell.class) {
                stdout = toolOut.toByteArray();
                stderr = toolErr.toByteArray();
                if (firstExit != null) {
                    code = firstExit;
                    stdout = Arrays.copyOf(stdout, outAtExit);
                    stderr = Arrays.copyOf(stderr, errAtExit);
                }
            }
            out.print("@@TOOL-RESULT@@ " + code + " " + stdout.length + " " + stderr.length + "\n");
            out.write(stdout);
            out.write(stderr);
            out.flush();
        }
    }

    private static int exitCode(Throwable thrown) {
        if (!(thrown instanceof Exited)) {
            thrown.printStackTrace();
        }
        return 1;  // replaced by the first Exit.exit's code if there was one
    }
}
