package io.modelcontextprotocol.modern.server;

import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.modern.McpSchema;
import java.util.Map;

/** McpRequestContext's constructor is the SDK's own: a request's context for unit tests. */
public final class TestContexts {
  private TestContexts() {}

  /** The context of a tools/call of "pay" over the given transport context. */
  public static McpRequestContext of(McpTransportContext transport) {
    return new McpRequestContext(1, "tools/call", "2026-07-28", McpSchema.ClientCapabilities.NONE, null, null, "pay",
        Map.of(), transport, true, true);
  }
}
