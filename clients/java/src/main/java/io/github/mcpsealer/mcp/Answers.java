package io.github.mcpsealer.mcp;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCResponse;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCResponse.JSONRPCError;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The outcome every adapter records for a consumed state (README, "Recorded
 * outcomes"): the JSON-RPC answer sent, without {@code jsonrpc} and
 * {@code id}, as UTF-8 JSON, {@code {"result": <the result as sent>}} or
 * {@code {"error": <the error as sent>}}. A retry is answered with it under
 * its own id, so that a Go, TypeScript, Python or Java server replays what
 * another recorded.
 */
final class Answers {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Answers() {}

  /** The outcome of an answer; throws when it is not JSON. */
  static byte[] encode(JSONRPCResponse answer) throws JsonProcessingException {
    Map<String, Object> doc = new LinkedHashMap<>();
    if (answer.error() != null) {
      Map<String, Object> error = new LinkedHashMap<>();
      error.put("code", answer.error().code());
      error.put("message", answer.error().message());
      if (answer.error().data() != null) {
        error.put("data", answer.error().data());
      }
      doc.put("error", error);
    } else {
      doc.put("result", answer.result());
    }
    return JSON.writeValueAsBytes(doc);
  }

  /**
   * The answer recorded, under the retry's id; anything but one of the two
   * shapes (other bytes, another member, an error without an integer code and
   * a string message) throws IllegalArgumentException.
   */
  static JSONRPCResponse decode(byte[] outcome, Object id) {
    JsonNode doc;
    try {
      doc = JSON.readTree(new String(outcome, StandardCharsets.UTF_8));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("an outcome is UTF-8 JSON");
    }
    if (doc == null || !doc.isObject() || doc.size() != 1) {
      throw new IllegalArgumentException("an outcome is an object of one member, \"result\" or \"error\"");
    }
    JsonNode result = doc.get("result");
    if (result != null && result.isObject()) {
      return JSONRPCResponse.result(id, JSON.convertValue(result, Map.class));
    }
    JsonNode error = doc.get("error");
    if (error != null && error.isObject() && error.path("code").canConvertToExactIntegral()
        && error.path("code").canConvertToInt() && error.path("message").isTextual()) {
      JsonNode data = error.get("data");
      return JSONRPCResponse.error(id, new JSONRPCError(error.get("code").intValue(), error.get("message").textValue(),
          data == null ? null : JSON.convertValue(data, Object.class)));
    }
    throw new IllegalArgumentException("an outcome's \"result\" is an object, its \"error\" a JSON-RPC error object");
  }
}
