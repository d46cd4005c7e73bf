import java.io.FileInputStream;
import java.io.IOException;
import java.util.Collection;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;

/** What the scenario programs share: client properties from a file, and JSON lines on stdout. */
final class Json {
    private Json() {
    }

    /** The client properties of a scenario: a properties file (security settings and the like), or none for "-". */
    static Properties load(String path) throws IOException {
        Properties properties = new Properties();
        if (!path.equals("-")) {
            try (FileInputStream in = new FileInputStream(path)) {
                properties.load(in);
            }
        }
        return properties;
    }

    /** One JSON object from alternating keys and values; values may be strings, numbers, booleans,
     * null, collections and maps. */
    static String object(Object... keysAndValues) {
        StringBuilder out = new StringBuilder("{");
        for (int i = 0; i < keysAndValues.length; i += 2) {
            if (i > 0) {
                out.append(',');
            }
            out.append(value(keysAndValues[i])).append(':').append(value(keysAndValues[i + 1]));
        }
        return out.append('}').toString();
    }

    /** Prints one JSON line; synchronized so that lines of several threads never interleave. */
    static synchronized void print(Object... keysAndValues) {
        System.out.println(object(keysAndValues));
        System.out.flush();
    }

    static String value(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof Map<?, ?> map) {
            StringBuilder out = new StringBuilder("{");
            Iterator<? extends Map.Entry<?, ?>> entries = map.entrySet().iterator();
            while (entries.hasNext()) {
                Map.Entry<?, ?> entry = entries.next();
                out.append(value(String.valueOf(entry.getKey()))).append(':').append(value(entry.getValue()));
                if (entries.hasNext()) {
                    out.append(',');
                }
            }
            return out.append('}').toString();
        }
        if (value instanceof Collection<?> items) {
            StringBuilder out = new StringBuilder("[");
            Iterator<?> each = items.iterator();
            while (each.hasNext()) {
                out.append(value(each.next()));
                if (each.hasNext()) {
                    out.append(',');
                }
            }
            return out.append(']').toString();
        }
        String text = value.toString();
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
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
}
