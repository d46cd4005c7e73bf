import java.util.HashMap;
import java.util.Map;

/** Command-line options of the scenario programs: `--name value` pairs, every one required unless
 * a default is given. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] args) {
        if (args.length % 2 != 0) {
            throw new IllegalArgumentException("options come in --name value pairs");
        }
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected an option, got " + args[i]);
            }
            values.put(args[i].substring(2), args[i + 1]);
        }
    }

    String get(String name) {
        String value = values.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing option --" + name);
        }
        return value;
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    int integer(String name) {
        return Integer.parseInt(get(name));
    }

    int integer(String name, int fallback) {
        return values.containsKey(name) ? Integer.parseInt(values.get(name)) : fallback;
    }
}
