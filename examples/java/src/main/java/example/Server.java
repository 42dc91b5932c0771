package example;

import io.github.mcpsealer.SealerClient;
import io.github.mcpsealer.mcp.SealedRequestState;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.modern.McpSchema;
import io.modelcontextprotocol.modern.McpSchema.GetPromptOutcome;
import io.modelcontextprotocol.modern.McpSchema.GetPromptResult;
import io.modelcontextprotocol.modern.McpSchema.PromptMessage;
import io.modelcontextprotocol.modern.McpSchema.TextContent;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpServer;
import io.modelcontextprotocol.modern.server.McpSyncResponse;
import io.modelcontextprotocol.modern.server.feature.McpSyncPrompt;
import io.modelcontextprotocol.modern.server.feature.McpSyncPromptRepository;
import io.modelcontextprotocol.modern.server.feature.McpSyncTool;
import io.modelcontextprotocol.modern.server.feature.McpSyncToolRepository;
import io.modelcontextprotocol.modern.server.feature.PromptsFeature;
import io.modelcontextprotocol.modern.server.feature.PromptsPage;
import io.modelcontextprotocol.modern.server.feature.ToolsFeature;
import io.modelcontextprotocol.modern.server.feature.ToolsPage;
import io.modelcontextprotocol.modern.server.transport.HttpServletMcpTransport;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.NetworkConnector;

/**
 * The example MCP server: the official Java SDK's stateless MRTR server on
 * its own Streamable HTTP transport (a servlet, in embedded Jetty), with the
 * conformance suite's tools and prompt, a booking tool and a payment tool,
 * every requestState sealed by the sealer.
 *
 * <pre>
 * java -jar mcp-sealer-example.jar --sealer http://127.0.0.1:7443 [--addr 127.0.0.1:8080]
 *     [--rest] [--one-time] [--no-record-outcomes] [--tokens alice=TOKEN_A,bob=TOKEN_B]
 *     [--sealer-token TOKEN] [--sdk-codec]
 * </pre>
 *
 * <p>{@code --sdk-codec} is the control of the attack tests: the SDK's own
 * default codec ({@code HmacRequestStateCodec}: a key of its own, no principal,
 * no arguments, never one-time) instead of the sealer, which is then only
 * asked for its check.
 *
 * <p>With {@code --tokens} a bearer token is required and names the caller,
 * the principal of its states; without, every caller is anonymous. It prints
 * {@code listening on http://HOST:PORT/mcp} on stderr once it serves. {@code GET /calls}
 * and {@code GET /payments} say how often each tool's handler ran and each
 * payee was paid (JSON objects of counts), for the tests.
 */
public final class Server {
  private static final String USER = "example.user";

  private Server() {}

  /** The running server: its URL, its tools' counters, and its stop. */
  public record Running(String url, MrtrTools tools, SealedRequestState states, org.eclipse.jetty.server.Server jetty)
      implements AutoCloseable {
    @Override
    public void close() throws Exception {
      jetty.stop();
      states.flush();
    }

    /** How often the named tool's handler ran. */
    public int calls(String tool) {
      AtomicInteger n = tools.calls.get(tool);
      return n == null ? 0 : n.get();
    }

    /** How often the payee was paid. */
    public int payments(String payee) {
      AtomicInteger n = tools.payments.get(payee);
      return n == null ? 0 : n.get();
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> flags = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "--rest", "--one-time", "--no-record-outcomes", "--sdk-codec" -> flags.put(a, "true");
        case "--sealer", "--addr", "--tokens", "--sealer-token" -> {
          if (i + 1 >= args.length) {
            usage(a + " needs a value");
          }
          flags.put(a, args[++i]);
        }
        default -> usage("unknown flag " + a);
      }
    }
    if (!flags.containsKey("--sealer")) {
      usage("--sealer is required");
    }
    Map<String, String> tokens = new HashMap<>();
    if (flags.containsKey("--tokens")) {
      for (String pair : flags.get("--tokens").split(",")) {
        String[] kv = pair.split("=", 2);
        if (kv.length != 2 || kv[0].isEmpty() || kv[1].isEmpty()) {
          usage("--tokens takes name=TOKEN pairs");
        }
        tokens.put(kv[1], kv[0]);
      }
    }
    String[] addr = flags.getOrDefault("--addr", "127.0.0.1:8080").split(":", 2);
    SealerClient.Builder sealer = flags.containsKey("--rest")
        ? SealerClient.rest(flags.get("--sealer")) : SealerClient.grpc(flags.get("--sealer"));
    if (flags.containsKey("--sealer-token")) {
      sealer.token(flags.get("--sealer-token"));
    }
    SealedRequestState.Builder states = SealedRequestState.builder(sealer.build())
        .oneTime(flags.containsKey("--one-time"))
        .recordOutcomes(!flags.containsKey("--no-record-outcomes"));
    Running running = start(new InetSocketAddress(addr[0], Integer.parseInt(addr[1])), states, tokens,
        flags.containsKey("--sdk-codec"));
    running.states().check();
    System.err.println("listening on " + running.url());
    running.jetty().join();
  }

  private static void usage(String why) {
    System.err.println("example server: " + why);
    System.exit(2);
  }

  /**
   * Starts the server on addr: with tokens (token to name), a bearer token
   * is required and its name is the principal; without, callers are anonymous.
   */
  public static Running start(InetSocketAddress addr, SealedRequestState.Builder builder, Map<String, String> tokens,
      boolean sdkCodec) throws Exception {
    SealedRequestState states = tokens.isEmpty()
        ? builder.allowAnonymous().build()
        : builder.principal(ctx -> (String) ctx.get(USER)).build();
    MrtrTools tools = new MrtrTools();
    McpServer.Builder mcp = McpServer.builder()
        .serverInfo(McpSchema.Implementation.builder("sealer-java-example", "0.1.0").build())
        .feature(ToolsFeature.ofSync(repository(tools.sdkTools())))
        .feature(PromptsFeature.ofSync(prompts()));
    if (!sdkCodec) {
      mcp.requestStateCodec(states.codec());
    }
    McpServer server = mcp.build();
    HttpServletMcpTransport transport = HttpServletMcpTransport.builder(sdkCodec ? server : states.guard(server))
        .endpoint("/mcp")
        .contextExtractor(request -> {
          String user = tokens.get(bearer(request));
          return user == null ? McpTransportContext.EMPTY : McpTransportContext.create(Map.of(USER, user));
        })
        .build();

    org.eclipse.jetty.server.Server jetty = new org.eclipse.jetty.server.Server(addr);
    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(new ServletHolder(tokens.isEmpty() ? transport : new HttpServlet() {
      @Override
      protected void service(HttpServletRequest req, HttpServletResponse res) throws jakarta.servlet.ServletException, IOException {
        if (!tokens.containsKey(bearer(req))) {
          res.sendError(401, "a bearer token is required");
          return;
        }
        transport.service(req, res);
      }
    }), "/mcp");
    context.addServlet(new ServletHolder(counter(tools.calls)), "/calls");
    context.addServlet(new ServletHolder(counter(tools.payments)), "/payments");
    jetty.setHandler(context);
    jetty.start();
    NetworkConnector c = (NetworkConnector) jetty.getConnectors()[0];
    String url = "http://" + addr.getHostString() + ":" + c.getLocalPort() + "/mcp";
    return new Running(url, tools, states, jetty);
  }

  private static String bearer(HttpServletRequest request) {
    String h = request.getHeader("Authorization");
    return h != null && h.startsWith("Bearer ") ? h.substring("Bearer ".length()) : "";
  }

  /** Serves a JSON object of counts by name: the tools' runs or the payees' payments. */
  private static HttpServlet counter(Map<String, AtomicInteger> counts) {
    return new HttpServlet() {
      @Override
      protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
        res.setContentType("application/json");
        new com.fasterxml.jackson.databind.ObjectMapper().writeValue(res.getWriter(), counts);
      }
    };
  }

  private static McpSyncToolRepository repository(List<McpSyncTool> tools) {
    Map<String, McpSyncTool> byName = new HashMap<>();
    tools.forEach(t -> byName.put(t.definition().name(), t));
    return new McpSyncToolRepository() {
      @Override
      public ToolsPage list(McpRequestContext ctx, String cursor) {
        return ToolsPage.of(tools.stream().map(McpSyncTool::definition).toList());
      }

      @Override
      public McpSyncTool find(McpRequestContext ctx, String name) {
        return byName.get(name);
      }
    };
  }

  /** The prompt: asks for context with a sealed state, then renders it as a user message. */
  private static McpSyncPromptRepository prompts() {
    McpSyncPrompt prompt = McpSyncPrompt.of(
        new McpSchema.Prompt(MrtrTools.PROMPT, null, "asks for context with a sealed state", List.of(), null, null),
        (ctx, request) -> {
          MrtrTools.Round r = new MrtrTools.Round(ctx, MrtrTools.orEmpty(request.inputResponses()), request.requestState(), Map.of());
          if (r.stateOf("prompt") != null && r.accepted("user_context") != null) {
            String text = "Context: " + r.accepted("user_context").get("context");
            return McpSyncResponse.<GetPromptOutcome>result(GetPromptResult.builder(
                List.of(new PromptMessage(McpSchema.Role.USER, new TextContent(null, text, null)))).build());
          }
          return McpSyncResponse.<GetPromptOutcome>result(MrtrTools.ask(
              Map.of("user_context", MrtrTools.elicit("What context should the prompt use?", "context")), Map.of("tool", "prompt")));
        });
    return new McpSyncPromptRepository() {
      @Override
      public PromptsPage list(McpRequestContext ctx, String cursor) {
        return PromptsPage.of(List.of(prompt.definition()));
      }

      @Override
      public McpSyncPrompt find(McpRequestContext ctx, String name) {
        return MrtrTools.PROMPT.equals(name) ? prompt : null;
      }
    };
  }
}
