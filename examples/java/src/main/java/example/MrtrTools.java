package example;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.mcpsealer.mcp.SealedRequestState;
import io.modelcontextprotocol.modern.McpSchema;
import io.modelcontextprotocol.modern.McpSchema.CallToolOutcome;
import io.modelcontextprotocol.modern.McpSchema.CallToolResult;
import io.modelcontextprotocol.modern.McpSchema.CreateMessageRequest;
import io.modelcontextprotocol.modern.McpSchema.ElicitFormRequest;
import io.modelcontextprotocol.modern.McpSchema.InputRequiredResult;
import io.modelcontextprotocol.modern.McpSchema.SamplingMessage;
import io.modelcontextprotocol.modern.McpSchema.TextContent;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpSyncResponse;
import io.modelcontextprotocol.modern.server.feature.McpSyncTool;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The tools and the prompt of the MCP conformance suite's input-required-result
 * scenarios (SEP-2322), a booking tool with arguments that the attack tests
 * use, and a payment tool whose answers are recorded: the same tools as
 * examples/python/mrtr_tools.py.
 *
 * <p>A tool sees one round of a request: the client's {@code inputResponses},
 * the plaintext {@code requestState} the previous round returned (opened by
 * the sealer before the handler runs), and the request's client
 * capabilities. Every state it returns is plaintext JSON; the sealer seals it
 * on the way out and opens it on the retry, so a state that was tampered
 * with, replayed, or presented with another request never reaches it.
 */
final class MrtrTools {
  static final String PREFIX = "test_input_required_result_";
  static final String PROMPT = PREFIX + "prompt";
  static final String PAY = "pay";
  static final String BOOK = "book_seat";

  private static final ObjectMapper JSON = new ObjectMapper();

  /** How often each tool's handler ran, by tool; the payments made, by payee. */
  final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
  final Map<String, AtomicInteger> payments = new ConcurrentHashMap<>();
  private final AtomicInteger paid = new AtomicInteger();

  /** One round of a request, as a tool sees it. */
  record Round(McpRequestContext ctx, Map<String, Object> responses, String state, Map<String, Object> arguments) {
    /** The state this tool issued in the previous round, or null (no state, or another tool's). */
    Map<String, Object> stateOf(String tool) {
      if (state == null) {
        return null;
      }
      try {
        Map<?, ?> m = JSON.readValue(state, Map.class);
        @SuppressWarnings("unchecked")
        Map<String, Object> s = (Map<String, Object>) m;
        return tool.equals(s.get("tool")) ? s : null;
      } catch (JsonProcessingException e) {
        return null;
      }
    }

    /** The content of an accepted elicitation answer under key, or null. */
    Map<?, ?> accepted(String key) {
      if (responses.get(key) instanceof Map<?, ?> answer && "accept".equals(answer.get("action"))
          && answer.get("content") instanceof Map<?, ?> content) {
        return content;
      }
      return null;
    }

    /** A non-empty string field of an accepted elicitation answer, or "". */
    String text(String key, String field) {
      Map<?, ?> content = accepted(key);
      return content != null && content.get(field) instanceof String s ? s : "";
    }

    boolean sampled(String key) {
      return responses.get(key) instanceof Map<?, ?> m && m.containsKey("content") && m.containsKey("role");
    }

    /** How many roots a roots/list answer under key holds, or -1. */
    int roots(String key) {
      return responses.get(key) instanceof Map<?, ?> m && m.get("roots") instanceof List<?> l ? l.size() : -1;
    }
  }

  interface Tool {
    Object answer(Round r);
  }

  /** The tools by name: the conformance suite's, the booking and the payment tool. */
  Map<String, Tool> tools() {
    Map<String, Tool> t = new LinkedHashMap<>();
    t.put(PREFIX + "elicitation", MrtrTools::elicitation);
    t.put(PREFIX + "sampling", r -> r.sampled("capital_question") ? "Sampling response received"
        : ask(Map.of("capital_question", sample("What is the capital of France?", 100)), null));
    t.put(PREFIX + "list_roots", r -> r.roots("client_roots") >= 0
        ? "Client exposed " + r.roots("client_roots") + " root(s)"
        : ask(Map.of("client_roots", ROOTS), null));
    t.put(PREFIX + "request_state", r -> confirmWithState(r, "request_state"));
    t.put(PREFIX + "tampered_state", r -> confirmWithState(r, "request_state"));
    t.put(PREFIX + "multiple_inputs", MrtrTools::multipleInputs);
    t.put(PREFIX + "multi_round", MrtrTools::multiRound);
    t.put(PREFIX + "capabilities", MrtrTools::capabilities);
    t.put(BOOK, MrtrTools::book);
    t.put(PAY, this::pay);
    return t;
  }

  /** The tools as the SDK's tools: each counts its runs, then answers. */
  List<McpSyncTool> sdkTools() {
    Map<String, Object> schema = Map.of("type", "object");
    return tools().entrySet().stream().map(e -> McpSyncTool.of(
        McpSchema.Tool.builder(e.getKey(), schema).description("the " + e.getKey() + " tool").build(),
        (ctx, request) -> {
          calls.computeIfAbsent(e.getKey(), k -> new AtomicInteger()).incrementAndGet();
          Round r = new Round(ctx, orEmpty(request.inputResponses()), request.requestState(), orEmpty(request.arguments()));
          return McpSyncResponse.<CallToolOutcome>result(toolAnswer(e.getValue().answer(r)));
        })).toList();
  }

  static <K, V> Map<K, V> orEmpty(Map<K, V> m) {
    return m == null ? Map.of() : m;
  }

  private static CallToolOutcome toolAnswer(Object answer) {
    if (answer instanceof InputRequiredResult irr) {
      return irr;
    }
    return CallToolResult.builder().content(List.of(new TextContent(null, (String) answer, null))).build();
  }

  // The input requests the tools ask.

  private static final Object ROOTS = new Object();

  static ElicitFormRequest elicit(String message, String field, String kind) {
    Map<String, Object> schema = Map.of("type", "object", "properties", Map.of(field, Map.of("type", kind)),
        "required", List.of(field));
    return new ElicitFormRequest(message, schema, null);
  }

  static ElicitFormRequest elicit(String message, String field) {
    return elicit(message, field, "string");
  }

  static CreateMessageRequest sample(String text, int maxTokens) {
    return CreateMessageRequest.builder(
        List.of(new SamplingMessage(McpSchema.Role.USER, new TextContent(null, text, null))), maxTokens).build();
  }

  /** An InputRequiredResult; a state, when given, is plaintext JSON for the sealer to seal. */
  @SuppressWarnings("deprecation")
  static InputRequiredResult ask(Map<String, Object> requests, Map<String, Object> state) {
    InputRequiredResult.Builder b = InputRequiredResult.builder();
    new TreeMap<>(requests).forEach((key, req) -> {
      if (req instanceof ElicitFormRequest e) {
        b.elicit(key, e);
      } else if (req instanceof CreateMessageRequest c) {
        b.createMessage(key, c);
      } else {
        b.listRoots(key);
      }
    });
    if (state != null) {
      try {
        b.requestState(JSON.writeValueAsString(new TreeMap<>(state)));
      } catch (JsonProcessingException e) {
        throw new IllegalStateException(e);
      }
    }
    return b.build();
  }

  // The tools.

  /** No state: a valid user_name completes, anything else asks (again). */
  static Object elicitation(Round r) {
    String name = r.text("user_name", "name");
    return !name.isEmpty() ? "Hello, " + name + "!" : ask(Map.of("user_name", elicit("What is your name?", "name")), null);
  }

  /** A confirmation with a sealed state (the tampered_state tool too: a state that does not open never gets here). */
  static Object confirmWithState(Round r, String tool) {
    if (r.stateOf(tool) != null && r.accepted("confirm") != null) {
      return "state-ok: requestState opened and confirmation accepted";
    }
    return ask(Map.of("confirm", elicit("Please confirm", "ok", "boolean")), Map.of("tool", tool));
  }

  static Object multipleInputs(Round r) {
    String name = r.text("user_name", "name");
    int roots = r.roots("client_roots");
    if (r.stateOf("multiple_inputs") != null && !name.isEmpty() && r.sampled("greeting") && roots >= 0) {
      return "Hello " + name + ", " + roots + " root(s) visible";
    }
    return ask(Map.of("user_name", elicit("What is your name?", "name"),
        "greeting", sample("Generate a greeting", 50), "client_roots", ROOTS), Map.of("tool", "multiple_inputs"));
  }

  /** Two rounds of input, the progress kept in the sealed state only: a new state each round. */
  static Object multiRound(Round r) {
    Map<String, Object> state = r.stateOf("multi_round");
    if (state == null) {
      return ask(Map.of("step1", elicit("Step 1: What is your name?", "name")), Map.of("tool", "multi_round", "round", 1));
    }
    if (Integer.valueOf(1).equals(state.get("round"))) {
      return ask(Map.of("step2", elicit("Step 2: What is your favorite color?", "color")),
          Map.of("tool", "multi_round", "round", 2, "name", r.text("step1", "name")));
    }
    return "Multi-round complete: " + state.get("name") + " likes " + r.text("step2", "color");
  }

  /** Asks only for what the client declared it can answer (no state). */
  static Object capabilities(Round r) {
    if (!r.responses().isEmpty()) {
      return "Capability-aware input requests fulfilled";
    }
    McpSchema.ClientCapabilities caps = r.ctx().clientCapabilities();
    Map<String, Object> requests = new LinkedHashMap<>();
    if (caps.elicitation() != null) {
      requests.put("user_name", elicit("What is your name?", "name"));
    }
    if (caps.sampling() != null) {
      requests.put("greeting", sample("Generate a short greeting", 50));
    }
    if (caps.roots() != null) {
      requests.put("client_roots", ROOTS);
    }
    return requests.isEmpty() ? "No declared client capability supports an in-band input request" : ask(requests, null);
  }

  /**
   * Books the seat of its arguments in three rounds: round 1 asks to confirm
   * (key {@code confirm}), round 2 for a card (key {@code payment}), round 3
   * books. Every state names the seat and the step it asked.
   */
  static Object book(Round r) {
    String seat = String.valueOf(r.arguments().get("seat"));
    Map<String, Object> state = r.stateOf(BOOK);
    Object step = state == null ? null : state.get("step");
    if (Integer.valueOf(2).equals(step) && !r.text("payment", "card").isEmpty()) {
      return "booked " + state.get("seat") + " with card " + r.text("payment", "card");
    }
    if (Integer.valueOf(1).equals(step) && r.accepted("confirm") != null
        && Boolean.TRUE.equals(r.accepted("confirm").get("ok"))) {
      return ask(Map.of("payment", elicit("Which card pays for " + seat + "?", "card")),
          Map.of("tool", BOOK, "seat", seat, "step", 2));
    }
    return ask(Map.of("confirm", elicit("Book " + seat + "?", "ok", "boolean")), Map.of("tool", BOOK, "seat", seat, "step", 1));
  }

  /**
   * Round 1 asks to confirm the payment (key {@code confirm}); round 2 pays
   * if confirmed, and answers with the payment's number among all made, so
   * that a second payment would answer differently from the first. Its
   * states open once ({@link SealedRequestState#oneTime}).
   */
  Object pay(Round r) {
    String payee = String.valueOf(r.arguments().get("payee"));
    Object amount = r.arguments().get("amount");
    if (r.stateOf(PAY) == null) {
      SealedRequestState.oneTime(r.ctx());
      return ask(Map.of("confirm", elicit("Pay " + amount + " to " + payee + "?", "ok", "boolean")), Map.of("tool", PAY));
    }
    Map<?, ?> confirm = r.accepted("confirm");
    if (confirm == null || !Boolean.TRUE.equals(confirm.get("ok"))) {
      return "not paid: " + amount + " to " + payee + " was not confirmed";
    }
    payments.computeIfAbsent(payee, k -> new AtomicInteger()).incrementAndGet();
    return "paid " + amount + " to " + payee + ": payment " + paid.incrementAndGet();
  }
}
