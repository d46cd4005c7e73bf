// Serializes sample messages with Apache Kafka's own generated message classes, for
// tests/interop/test_conformance.py: the bytes Kafka writes are the golden bytes that
// minikafka's protocol/ must decode and encode back unchanged.
//
// Input: one JSON object per line,
//   {"api": "Produce", "request": true, "version": 9, "message": {...}}
// where "message" is the JSON form of the message read by Kafka's generated
// <Api><Request|Response>DataJsonConverter, or null for a message left at its defaults.
// Output: one line per input line, {"bytes": "<hex>"} or {"error": "<what Kafka said>"}.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;

public final class GoldenMessages {
    private static final String PACKAGE = "org.apache.kafka.common.message.";

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.UTF_8);
             PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[1]), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                ObjectNode result = mapper.createObjectNode();
                try {
                    result.put("bytes", hex(serialize(mapper.readTree(line))));
                } catch (Throwable error) {
                    Throwable cause = error instanceof InvocationTargetException ? error.getCause() : error;
                    result.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
                }
                out.println(mapper.writeValueAsString(result));
            }
        }
    }

    private static byte[] serialize(JsonNode input) throws Exception {
        String kind = input.get("request").asBoolean() ? "Request" : "Response";
        String name = PACKAGE + input.get("api").asText() + kind + "Data";
        short version = (short) input.get("version").asInt();
        JsonNode json = input.get("message");
        ApiMessage message;
        if (json == null || json.isNull()) {
            message = (ApiMessage) Class.forName(name).getConstructor().newInstance();
        } else {
            Method read = Class.forName(name + "JsonConverter").getMethod("read", JsonNode.class, short.class);
            message = (ApiMessage) read.invoke(null, json, version);
        }
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        if (buffer.hasRemaining()) {
            throw new IllegalStateException(buffer.remaining() + " bytes of the computed size left unwritten");
        }
        return buffer.array();
    }

    private static String hex(byte[] bytes) {
        StringBuilder text = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            text.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return text.toString();
    }
}
