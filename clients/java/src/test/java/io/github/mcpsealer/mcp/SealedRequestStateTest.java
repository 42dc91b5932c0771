package io.github.mcpsealer.mcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.github.mcpsealer.SealerClient;
import io.github.mcpsealer.SealerException;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCNotification;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCRequest;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCResponse;
import io.modelcontextprotocol.modern.server.McpRequestManager;
import io.modelcontextprotocol.modern.server.McpTransportResponse;
import io.modelcontextprotocol.modern.server.TestContexts;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Outcome;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The guard's error paths and its threads, over a fake sealer (the real one
 * is e2e's: examples/java against a sealer binary).
 */
@SuppressWarnings("unchecked")
class SealedRequestStateTest {
  /** A sealer whose open answers as told, noting the thread of each call. */
  static class FakeSealer implements SealerClient {
    final Function<OpenRequest, OpenResponse> open;
    final List<String> threads = new CopyOnWriteArrayList<>();
    final List<Boolean> nonBlocking = new CopyOnWriteArrayList<>();

    FakeSealer(Function<OpenRequest, OpenResponse> open) {
      this.open = open;
    }

    private void note() {
      threads.add(Thread.currentThread().getName());
      nonBlocking.add(Schedulers.isInNonBlockingThread());
    }

    @Override
    public SealResponse seal(SealRequest request) {
      note();
      return SealResponse.newBuilder().setRequestState("SEALED-" + request.getPayload().toStringUtf8()).build();
    }

    @Override
    public OpenResponse open(OpenRequest request) {
      note();
      return open.apply(request);
    }

    @Override
    public RecordResponse record(RecordRequest request) {
      note();
      return RecordResponse.getDefaultInstance();
    }

    @Override
    public String target() {
      return "fake";
    }

    @Override
    public void close() {}
  }

  /** A server that counts its calls and answers a complete result. */
  static class CountingServer implements McpRequestManager {
    final AtomicInteger calls = new AtomicInteger();

    @Override
    public Mono<McpTransportResponse> handle(McpTransportContext ctx, JSONRPCRequest request) {
      calls.incrementAndGet();
      return Mono.just(McpTransportResponse.result(JSONRPCResponse.result(request.id(), Map.of("resultType", "complete"))));
    }

    @Override
    public Mono<McpTransportResponse> handleBlocking(McpTransportContext ctx, JSONRPCRequest request) {
      return handle(ctx, request);
    }

    @Override
    public Mono<Void> handleNotification(McpTransportContext ctx, JSONRPCNotification notification) {
      return Mono.empty();
    }
  }

  static JSONRPCRequest retry(String state) {
    Map<String, Object> meta = Map.of("io.modelcontextprotocol/protocolVersion", "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities", Map.of("elicitation", Map.of()));
    return new JSONRPCRequest("2.0", "tools/call", 7, Map.of("_meta", meta, "name", "pay",
        "arguments", Map.of("amount", 5), "requestState", state,
        "inputResponses", Map.of("confirm", Map.of("action", "accept"))));
  }

  static SealerException failure(Reason reason, SealerException.Cause cause) {
    return new SealerException(reason, cause, 0, "sealer: test");
  }

  @Test
  void buildRefusesWithoutAPrincipalSourceAndWithBoth() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance());
    assertThrows(IllegalStateException.class, () -> SealedRequestState.builder(sealer).build());
    assertThrows(IllegalStateException.class,
        () -> SealedRequestState.builder(sealer).principal(ctx -> "alice").allowAnonymous().build());
  }

  @Test
  void theCodecAloneOpensNothingAndSealsNothing() {
    var codec = SealedRequestState.builder(new FakeSealer(r -> null)).allowAnonymous().build().codec();
    var ctx = TestContexts.of(McpTransportContext.EMPTY);
    assertNull(codec.open(ctx, "anything a client sends"));
    assertThrows(IllegalStateException.class, () -> codec.seal(ctx, "plaintext"));
  }

  @ParameterizedTest
  @CsvSource({
    "REASON_INVALID_STATE, NONE, -32602, invalid_request_state",
    "REASON_PRINCIPAL_MISMATCH, NONE, -32602, invalid_request_state",
    "REASON_ALREADY_CONSUMED, NONE, -32602, invalid_request_state",
    "REASON_OUTCOME_CONFLICT, NONE, -32602, outcome_conflict",
    "REASON_IN_PROGRESS, NONE, -32603, in_progress",
    "REASON_LEDGER_UNAVAILABLE, NONE, -32603, sealer_unavailable",
    "REASON_UNSPECIFIED, UNREACHABLE, -32603, sealer_unavailable",
    "REASON_UNAUTHENTICATED, NONE, -32603, sealer_misconfigured",
    "REASON_UNSPECIFIED, TLS, -32603, sealer_misconfigured",
  })
  void aFailedOpenIsAnsweredWithoutTheServer(Reason reason, SealerException.Cause cause, int code, String why) {
    CountingServer server = new CountingServer();
    FakeSealer sealer = new FakeSealer(r -> {
      throw failure(reason, cause);
    });
    var guard = SealedRequestState.builder(sealer).allowAnonymous().build().guard(server);
    McpTransportResponse answer = guard.handleBlocking(McpTransportContext.EMPTY, retry("AQAA")).block();
    JSONRPCResponse r = ((McpTransportResponse.Error) answer).response();
    assertEquals(code, r.error().code());
    assertEquals(Map.of("reason", why), r.error().data());
    assertEquals(7, r.id());
    assertEquals(0, server.calls.get(), "the server ran for a state that did not open");
  }

  @Test
  void aRecordedOutcomeIsReplayedUnderTheRetrysId() {
    CountingServer server = new CountingServer();
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.newBuilder()
        .setOutcome(Outcome.newBuilder().setData(ByteString.copyFromUtf8("{\"result\":{\"paid\":1}}"))).build());
    var guard = SealedRequestState.builder(sealer).allowAnonymous().build().guard(server);
    McpTransportResponse answer = guard.handleBlocking(McpTransportContext.EMPTY, retry("AQAA")).block();
    JSONRPCResponse r = ((McpTransportResponse.Result) answer).response();
    assertEquals(Map.of("paid", 1), r.result());
    assertEquals(7, r.id());
    assertEquals(0, server.calls.get());
  }

  @Test
  void anOpenedStateReachesTheServerOnlyAsAHandOff() {
    List<Object> seen = new CopyOnWriteArrayList<>();
    CountingServer server = new CountingServer() {
      @Override
      public Mono<McpTransportResponse> handle(McpTransportContext ctx, JSONRPCRequest request) {
        seen.add(((Map<?, ?>) request.params()).get("requestState"));
        return super.handle(ctx, request);
      }
    };
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.newBuilder().setPayload(ByteString.copyFromUtf8("plain")).build());
    var states = SealedRequestState.builder(sealer).principal(ctx -> "alice").build();
    states.guard(server).handleBlocking(McpTransportContext.EMPTY, retry("AQAA")).block();
    assertEquals(1, seen.size());
    String handOff = (String) seen.get(0);
    assertFalse(handOff.equals("AQAA") || handOff.equals("plain"), "the server got " + handOff);
    // The hand-off opens nothing in another request's context.
    assertNull(states.codec().open(TestContexts.of(McpTransportContext.EMPTY), handOff));
  }

  @Test
  void theSealerIsNeverCalledOnANonBlockingThread() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.newBuilder().setPayload(ByteString.copyFromUtf8("x")).build());
    var guard = SealedRequestState.builder(sealer).allowAnonymous().build().guard(new CountingServer());
    // The guard called from a Reactor event-loop-like thread (parallel: non-blocking).
    Mono.defer(() -> guard.handle(McpTransportContext.EMPTY, retry("AQAA")))
        .subscribeOn(Schedulers.parallel()).block();
    assertEquals(List.of(false), sealer.nonBlocking, "calls on threads " + sealer.threads);
    assertTrue(sealer.threads.get(0).contains("boundedElastic"), sealer.threads.toString());
  }
  @Test
  void aPrincipalSourceThatThrowsRefusesTheRetryAndRunsNothing() {
    CountingServer server = new CountingServer();
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance());
    var guard = SealedRequestState.builder(sealer).principal(ctx -> {
      throw new IllegalArgumentException("a malformed token");
    }).build().guard(server);
    JSONRPCResponse r = ((McpTransportResponse.Error) guard.handleBlocking(McpTransportContext.EMPTY, retry("AQAA")).block()).response();
    assertEquals(-32602, r.error().code());
    assertEquals(List.of(), sealer.threads, "the sealer was asked");
    assertEquals(0, server.calls.get());
  }

  @Test
  void aReservedPrincipalIsRefused() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance());
    var guard = SealedRequestState.builder(sealer).principal(ctx -> SealedRequestState.ANONYMOUS).build()
        .guard(new CountingServer());
    JSONRPCResponse r = ((McpTransportResponse.Error) guard.handleBlocking(McpTransportContext.EMPTY, retry("AQAA")).block()).response();
    assertEquals(-32602, r.error().code());
    assertEquals(List.of(), sealer.threads);
    assertEquals("mcp-sealer:anonymous", SealedRequestState.ANONYMOUS);
  }

  @Test
  void aStateLongerThanTheSealerWritesIsRefusedHere() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance());
    var guard = SealedRequestState.builder(sealer).allowAnonymous().build().guard(new CountingServer());
    JSONRPCResponse r = ((McpTransportResponse.Error) guard.handleBlocking(McpTransportContext.EMPTY,
        retry("A".repeat(SealedRequestState.MAX_STATE_CHARS + 1))).block()).response();
    assertEquals(Map.of("reason", "invalid_request_state"), r.error().data());
    assertEquals(List.of(), sealer.threads);
  }

  @Test
  void aRetryOfAnotherProtocolVersionIsLeftToTheServerUnopened() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance());
    CountingServer server = new CountingServer();
    var guard = SealedRequestState.builder(sealer).allowAnonymous().build().guard(server);
    Map<String, Object> params = new java.util.HashMap<>((Map<String, Object>) retry("AQAA").params());
    params.put("_meta", Map.of("io.modelcontextprotocol/protocolVersion", "2025-11-25",
        "io.modelcontextprotocol/clientCapabilities", Map.of()));
    guard.handleBlocking(McpTransportContext.EMPTY, new JSONRPCRequest("2.0", "tools/call", 7, params)).block();
    assertEquals(List.of(), sealer.threads, "the state was opened, its round spent");
    assertEquals(1, server.calls.get());
  }
  @Test
  void aSealTheSealerRefusesIsTheClientsToStartOver() {
    FakeSealer sealer = new FakeSealer(r -> OpenResponse.getDefaultInstance()) {
      @Override
      public SealResponse seal(SealRequest request) {
        throw failure(Reason.REASON_FLOW_EXHAUSTED, SealerException.Cause.NONE);
      }
    };
    var states = SealedRequestState.builder(sealer).allowAnonymous().build();
    // A server whose handler asks again: it hands a plaintext state to the codec.
    CountingServer asking = new CountingServer() {
      @Override
      public Mono<McpTransportResponse> handle(McpTransportContext ctx, JSONRPCRequest request) {
        String handOff = states.codec().seal(TestContexts.of(ctx), "{\"step\":2}");
        return Mono.just(McpTransportResponse.result(JSONRPCResponse.result(request.id(),
            Map.of("resultType", "input_required", "requestState", handOff, "inputRequests", Map.of()))));
      }
    };
    Map<String, Object> first = new java.util.HashMap<>((Map<String, Object>) retry("x").params());
    first.remove("requestState");
    first.remove("inputResponses");
    JSONRPCResponse r = ((McpTransportResponse.Error) states.guard(asking)
        .handleBlocking(McpTransportContext.EMPTY, new JSONRPCRequest("2.0", "tools/call", 7, first)).block()).response();
    assertEquals(-32602, r.error().code());
    assertEquals(Map.of("reason", "invalid_request_state"), r.error().data());
  }
}
