package io.github.mcpsealer.mcp;

import com.google.protobuf.ByteString;
import io.github.mcpsealer.AnswersDigest;
import io.github.mcpsealer.RequestDigest;
import io.github.mcpsealer.SealerClient;
import io.github.mcpsealer.SealerException;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCMessage;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCNotification;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCRequest;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCResponse;
import io.modelcontextprotocol.modern.JsonRpc.JSONRPCResponse.JSONRPCError;
import io.modelcontextprotocol.modern.server.McpRequestContext;
import io.modelcontextprotocol.modern.server.McpRequestManager;
import io.modelcontextprotocol.modern.server.McpTransportResponse;
import io.modelcontextprotocol.modern.server.RequestStateCodec;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import sealer.v1.SealerOuterClass.Binding;
import sealer.v1.SealerOuterClass.FlowRequest;
import sealer.v1.SealerOuterClass.InputKeys;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.SealRequest;

/**
 * The sealer as the requestState boundary of the official Java MCP SDK's
 * MRTR server ({@code io.modelcontextprotocol.modern.server.McpServer}):
 *
 * <pre>{@code
 * SealedRequestState states = SealedRequestState.builder(SealerClient.grpc("http://127.0.0.1:7443").build())
 *     .principal(ctx -> (String) ctx.get("user")).build();
 * McpServer server = McpServer.builder().serverInfo(info).feature(tools).requestStateCodec(states.codec()).build();
 * HttpServletMcpTransport transport = HttpServletMcpTransport.builder(states.guard(server)).contextExtractor(auth).build();
 * }</pre>
 *
 * <p>Handlers keep the SDK's idiom: they return an {@code InputRequiredResult}
 * with a plaintext {@code requestState} and read the plaintext back from the
 * retry's params. Two seams do the work, because the SDK's codec sees neither
 * the call's arguments nor the input requests:
 *
 * <ul>
 *   <li>{@link #guard(McpRequestManager)} wraps the server where the whole
 *       JSON-RPC request and answer pass. On a retry it opens the state with
 *       the sealer, bound to the caller's principal, to the request digest of
 *       the params as received (the method, the tool's or prompt's name and
 *       arguments, or the resource's uri) and to the keys of the retry's
 *       {@code inputResponses}, before any handler runs; on the way out it
 *       seals the state the handler returned, bound to the same, to the keys
 *       of the {@code inputRequests} it returned with, as the next round of
 *       the request's flow.</li>
 *   <li>{@link #codec()} is the SDK's {@code RequestStateCodec}: it binds
 *       nothing itself. It hands the plaintext the guard opened for this very
 *       request to the server, and the plaintext the handler returned back to
 *       the guard. Without the guard it opens nothing and seals nothing (the
 *       SDK answers such a request -32602, or -32603 for a seal), so neither
 *       seam alone lets a state through unsealed.</li>
 * </ul>
 *
 * <p>The principal comes from the transport context (what the transport's
 * context extractor put there after authenticating the caller), through
 * {@link Builder#principal}; with none, {@link Builder#allowAnonymous()} binds
 * every state to {@link #ANONYMOUS}, and without either {@link Builder#build()}
 * refuses: one principal is never shared by accident.
 *
 * <p>Every state is a round of a flow (FORMAT.md, "Flows"), latest-only by
 * default: a round once answered never opens again (no rewind, no fork).
 * {@link Builder#oneTime}, {@link Builder#oneTimeTools} and, for one round,
 * {@link #oneTime(McpRequestContext)} make a state open at most once.
 * Recorded outcomes are on by default ({@link Builder#recordOutcomes}): the
 * open that consumes a one-time state or a latest-only round runs the
 * handler, its answer is recorded, and a retry of that state that passes
 * every check gets that answer under its own id without the handler running
 * again; a retry with other {@code inputResponses} is refused.
 *
 * <p>What the MCP client sees of a failure, with {@code data.reason}: a
 * refused state -32602 "Invalid or expired requestState"
 * ({@code invalid_request_state}); a retry answering otherwise than the open
 * that ran the handler -32602 ({@code outcome_conflict}); a retry while that
 * handler still runs -32603 ({@code in_progress}); the sealer unavailable
 * -32603 ({@code sealer_unavailable}); the way to it wrong -32603
 * ({@code sealer_misconfigured}). Neither the sealer's address nor its reason
 * reaches the client: each failure is logged once, with both.
 *
 * <p>Every call to the sealer runs on Reactor's bounded-elastic scheduler,
 * never on the thread that called the guard, so no event loop blocks on it.
 */
public final class SealedRequestState {
  /**
   * The prefix of the principals the adapters of every language keep for
   * themselves: a principal source that returns one is refused.
   */
  public static final String RESERVED_PREFIX = "mcp-sealer:";

  /**
   * The principal of every state with {@link Builder#allowAnonymous()}: the
   * same in every language's adapter, so that a state opens on a Go,
   * TypeScript, Python or Java server of the same tenant alike.
   */
  public static final String ANONYMOUS = RESERVED_PREFIX + "anonymous";

  /** The longest requestState the sealer writes (FORMAT.md, "Limits"): a longer one is refused here. */
  static final int MAX_STATE_CHARS = 65_536;

  private static final Logger log = LoggerFactory.getLogger(SealedRequestState.class);

  private final SealerClient sealer;
  private final Function<McpTransportContext, String> principal;
  private final boolean oneTime;
  private final Set<String> oneTimeTools;
  private final boolean latestOnly;
  private final boolean recordOutcomes;
  private final Duration ttl;
  private final boolean anonymous;
  private final Set<String> supportedVersions;
  private final Set<CompletableFuture<?>> records = ConcurrentHashMap.newKeySet();

  private SealedRequestState(Builder b) {
    this.sealer = b.sealer;
    this.principal = b.principal;
    this.oneTime = b.oneTime;
    this.oneTimeTools = Set.copyOf(b.oneTimeTools);
    this.latestOnly = b.latestOnly;
    this.recordOutcomes = b.recordOutcomes;
    this.ttl = b.ttl;
    this.anonymous = b.anonymous;
    this.supportedVersions = Set.copyOf(b.supportedVersions);
  }

  /** A builder over a client of the sealer ({@link SealerClient#grpc} or {@link SealerClient#rest}). */
  public static Builder builder(SealerClient sealer) {
    return new Builder(sealer);
  }

  /** The codec to register with {@code McpServer.builder().requestStateCodec(...)}. */
  public RequestStateCodec codec() {
    return CODEC;
  }

  /** The server, guarded: what to give the transport in its place. */
  public McpRequestManager guard(McpRequestManager server) {
    Objects.requireNonNull(server, "server");
    return new McpRequestManager() {
      @Override
      public Mono<McpTransportResponse> handle(McpTransportContext ctx, JSONRPCRequest request) {
        return serve(ctx, request, server::handle);
      }

      @Override
      public Mono<McpTransportResponse> handleBlocking(McpTransportContext ctx, JSONRPCRequest request) {
        return serve(ctx, request, server::handleBlocking);
      }

      @Override
      public Mono<Void> handleNotification(McpTransportContext ctx, JSONRPCNotification notification) {
        return server.handleNotification(ctx, notification);
      }
    };
  }

  /**
   * Makes the state the current request returns open at most once, whatever
   * the builder says: for a handler whose next round must not run twice.
   * Outside a guarded request it does nothing.
   */
  public static void oneTime(McpRequestContext ctx) {
    if (ctx.transportContext().get(Round.KEY) instanceof Round r) {
      r.oneTime = true;
    }
  }

  /**
   * Asks the sealer for one seal: does it answer, are the credentials
   * accepted. A server calls it at start, and stops when it throws.
   */
  public void check() {
    sealer.seal(SealRequest.newBuilder()
        .setPrincipal("sealer-check")
        .setRequest(Binding.newBuilder().setDigest(ByteString.copyFrom(
            RequestDigest.of("tools/call", Map.of("name", "sealer-check")))))
        .setPayload(ByteString.copyFromUtf8("check"))
        .build());
  }

  /**
   * Waits until the answers on their way to the sealer are recorded (or
   * failed, each within the client's deadline): a server calls it as it
   * stops; a test before it counts what was recorded.
   */
  public void flush() {
    List<CompletableFuture<?>> pending;
    while (!(pending = new ArrayList<>(records)).isEmpty()) {
      CompletableFuture.allOf(pending.toArray(CompletableFuture[]::new)).exceptionally(e -> null).join();
    }
  }

  private interface Next {
    Mono<McpTransportResponse> handle(McpTransportContext ctx, JSONRPCRequest request);
  }

  private Mono<McpTransportResponse> serve(McpTransportContext ctx, JSONRPCRequest request, Next next) {
    if (!RequestDigest.INPUT_REQUIRED_METHODS.contains(request.method()) || !(request.params() instanceof Map<?, ?> raw)) {
      return next.handle(ctx, request);
    }
    @SuppressWarnings("unchecked")
    Map<String, Object> params = (Map<String, Object>) raw;
    Object presented = params.get("requestState");
    if (presented == null) {
      Round round = new Round(request.method(), params, principalOf(ctx), null, null, null);
      return answer(round, next.handle(ctx.putAll(Map.of(Round.KEY, round)), request))
          .onErrorResume(e -> Mono.just(internalError(request, e)));
    }
    if (!(presented instanceof String state) || !looksValid(params, supportedVersions)) {
      // The server answers this retry its own error before any state is
      // opened (the codec refuses what the guard did not open).
      return next.handle(ctx, request);
    }
    if (state.length() > MAX_STATE_CHARS) {
      return Mono.just(refused(request, "a requestState of " + state.length() + " characters"));
    }
    String who = principalOf(ctx);
    if (who == null) {
      return Mono.just(refused(request, "a retry without a principal"));
    }
    byte[] digest;
    byte[] answers;
    try {
      digest = RequestDigest.of(request.method(), params);
      answers = recordOutcomes ? AnswersDigest.of(params.get("inputResponses")) : null;
    } catch (SealerException e) {
      return Mono.just(refused(request, e.getMessage()));
    }
    OpenRequest.Builder open = OpenRequest.newBuilder()
        .setRequestState(state)
        .setPrincipal(who)
        .setRequest(Binding.newBuilder().setDigest(ByteString.copyFrom(digest)))
        .setResponded(InputKeys.newBuilder().addAllKeys(keysOf(params.get("inputResponses"))))
        .setRecordOutcome(recordOutcomes);
    if (answers != null) {
      open.setAnswers(ByteString.copyFrom(answers));
    }
    return blocking(() -> sealer.open(open.build()))
        .flatMap(opened -> {
          if (opened.hasOutcome()) {
            return Mono.just(replay(request, opened));
          }
          Round round = new Round(request.method(), params, who, digest, state, opened);
          Map<String, Object> handedOff = new LinkedHashMap<>(params);
          handedOff.put("requestState", round.openToken());
          JSONRPCRequest retry = new JSONRPCRequest(request.jsonrpc(), request.method(), request.id(), handedOff);
          return answer(round, next.handle(ctx.putAll(Map.of(Round.KEY, round)), retry));
        })
        .onErrorResume(SealerException.class, e -> Mono.just(openFailed(request, e)))
        .onErrorResume(e -> !(e instanceof SealerException), e -> Mono.just(internalError(request, e)));
  }

  /** An answer for what failed in the guard itself: logged here, never shown to the client. */
  private static McpTransportResponse internalError(JSONRPCRequest request, Throwable e) {
    log.error("a request on {} failed in the sealer's guard", request.method(), e);
    return McpTransportResponse.error(failure(request.id(), -32603, "Internal error", null));
  }

  /** The server's answer, its state sealed, its outcome recorded when the open asked for it. */
  private Mono<McpTransportResponse> answer(Round round, Mono<McpTransportResponse> served) {
    return served.flatMap(response -> {
      if (response instanceof McpTransportResponse.Streaming s) {
        return Mono.just(McpTransportResponse.streaming(s.messages().concatMap(m ->
            m instanceof JSONRPCResponse r ? finish(round, r).map(JSONRPCMessage.class::cast) : Mono.just(m))));
      }
      JSONRPCResponse r = response instanceof McpTransportResponse.Result res
          ? res.response() : ((McpTransportResponse.Error) response).response();
      return finish(round, r).map(f -> f.error() != null ? McpTransportResponse.error(f) : McpTransportResponse.result(f));
    });
  }

  private Mono<JSONRPCResponse> finish(Round round, JSONRPCResponse response) {
    Mono<JSONRPCResponse> sealed = Mono.just(response);
    if (round.sealToken() != null && response.result() instanceof Map<?, ?> result
        && round.sealToken().equals(result.get("requestState"))) {
      sealed = seal(round, response, result);
    }
    if (round.opened == null || !round.opened.getRecording()) {
      return sealed;
    }
    // Exactly one record per consumed state: the answer sent, or none when
    // it failed or its stream was cancelled (a client gone mid-stream), so
    // that a retry is refused at once rather than waiting in vain.
    java.util.concurrent.atomic.AtomicBoolean once = new java.util.concurrent.atomic.AtomicBoolean();
    return sealed.doOnNext(sent -> {
          if (once.compareAndSet(false, true)) {
            record(round, sent, false);
          }
        })
        .doFinally(signal -> {
          if (once.compareAndSet(false, true)) {
            record(round, null, true);
          }
        });
  }

  private Mono<JSONRPCResponse> seal(Round round, JSONRPCResponse response, Map<?, ?> result) {
    if (round.principal == null) {
      log.error("a state of {} was not sealed: no principal for the caller", round.method);
      return Mono.just(round.answeredHere(failure(response.id(), -32603, "Internal error", null)));
    }
    // A retry's digest is the one its open was bound to; a first round's is
    // computed here.
    byte[] digest = round.digest;
    try {
      if (digest == null) {
        digest = RequestDigest.of(round.method, round.params);
      }
    } catch (SealerException e) {
      log.error("a state of {} was not sealed: {}", round.method, e.getMessage());
      return Mono.just(round.answeredHere(failure(response.id(), -32603, "Internal error", null)));
    }
    FlowRequest.Builder flow = FlowRequest.newBuilder()
        .setLatestOnly(latestOnly)
        .setAsked(InputKeys.newBuilder().addAllKeys(keysOf(result.get("inputRequests"))));
    if (round.opened != null && round.opened.hasFlow()) {
      flow.setContinues(round.presented);
    }
    SealRequest.Builder req = SealRequest.newBuilder()
        .setPrincipal(round.principal)
        .setRequest(Binding.newBuilder().setDigest(ByteString.copyFrom(digest)))
        .setPayload(ByteString.copyFrom(round.pending(), StandardCharsets.UTF_8))
        .setOneTime(oneTime || round.oneTime
            || ("tools/call".equals(round.method) && oneTimeTools.contains(round.target())))
        .setFlow(flow);
    if (ttl != null) {
      req.setTtl(com.google.protobuf.Duration.newBuilder().setSeconds(ttl.getSeconds()).setNanos(ttl.getNano()));
    }
    return blocking(() -> sealer.seal(req.build()))
        .map(sealed -> {
          Map<String, Object> out = new LinkedHashMap<>();
          result.forEach((k, v) -> out.put(String.valueOf(k), v));
          out.put("requestState", sealed.getRequestState());
          return JSONRPCResponse.result(response.id(), out);
        })
        .onErrorResume(SealerException.class, e -> {
          // The handler ran; its input_required answer is dropped.
          if (e.rejected()) {
            // The flow past its deadline or out of rounds: the client's to start over.
            log.warn("a state of {} was not sealed: the sealer at {}: {} ({})", round.method, sealer.target(), e.why(), e.getMessage());
            return Mono.just(round.answeredHere(failure(response.id(), -32602, "Invalid or expired requestState", "invalid_request_state")));
          }
          log.error("a state of {} was not sealed: the sealer at {}: {} ({})", round.method, sealer.target(), e.why(), e.getMessage());
          return Mono.just(round.answeredHere(failure(response.id(), -32603,
              e.unavailable() ? "requestState sealer unavailable" : "requestState sealer misconfigured",
              e.unavailable() ? "sealer_unavailable" : "sealer_misconfigured")));
        });
  }

  /**
   * Records the answer sent for a state this request's open consumed, beside
   * the answer: a failed record is logged and never holds it up. An answer
   * that is not the handler's (a failed seal) is recorded as none, so that a
   * retry is refused at once rather than served.
   */
  private void record(Round round, JSONRPCResponse sent, boolean none) {
    byte[] outcome;
    try {
      outcome = none || round.answeredHere() ? new byte[0] : Answers.encode(sent);
    } catch (Exception e) {
      log.error("the answer to {} is not JSON ({}): recorded as none", round.method, e.getMessage());
      outcome = new byte[0];
    }
    RecordRequest req = RecordRequest.newBuilder()
        .setRequestState(round.presented)
        .setOutcome(ByteString.copyFrom(outcome))
        .build();
    int size = outcome.length;
    CompletableFuture<?> done = blocking(() -> sealer.record(req)).toFuture();
    records.add(done);
    done.whenComplete((ok, e) -> {
      records.remove(done);
      if (e instanceof SealerException se) {
        log.error("the answer to {} ({} bytes) was not recorded: the sealer at {}: {} ({})",
            round.method, size, sealer.target(), se.why(), se.getMessage());
      } else if (e != null) {
        log.error("the answer to {} was not recorded", round.method, e);
      }
    });
  }

  private McpTransportResponse replay(JSONRPCRequest request, OpenResponse opened) {
    JSONRPCResponse answer;
    try {
      answer = Answers.decode(opened.getOutcome().getData().toByteArray(), request.id());
    } catch (IllegalArgumentException e) {
      log.error("a retry on {}: the outcome recorded for its state is not an answer ({})", request.method(), e.getMessage());
      return McpTransportResponse.error(failure(request.id(), -32603, "Internal error", null));
    }
    log.info("a retry on {} answered with the answer recorded; the handler did not run", request.method());
    return answer.error() != null ? McpTransportResponse.error(answer) : McpTransportResponse.result(answer);
  }

  private McpTransportResponse openFailed(JSONRPCRequest request, SealerException e) {
    log.warn("a requestState of {} was not opened: the sealer at {}: {} ({})", request.method(), sealer.target(), e.why(), e.getMessage());
    if (e.reason() == Reason.REASON_OUTCOME_CONFLICT) {
      return McpTransportResponse.error(failure(request.id(), -32602,
          "invalid requestState: answered before for other inputResponses", "outcome_conflict"));
    }
    if (e.reason() == Reason.REASON_IN_PROGRESS) {
      return McpTransportResponse.error(failure(request.id(), -32603, "Request still in progress", "in_progress"));
    }
    if (e.rejected()) {
      return McpTransportResponse.error(failure(request.id(), -32602, "Invalid or expired requestState", "invalid_request_state"));
    }
    if (e.unavailable()) {
      return McpTransportResponse.error(failure(request.id(), -32603, "requestState sealer unavailable", "sealer_unavailable"));
    }
    return McpTransportResponse.error(failure(request.id(), -32603, "requestState sealer misconfigured", "sealer_misconfigured"));
  }

  private static McpTransportResponse refused(JSONRPCRequest request, String why) {
    log.warn("a requestState of {} was refused: {}", request.method(), why);
    return McpTransportResponse.error(failure(request.id(), -32602, "Invalid or expired requestState", "invalid_request_state"));
  }

  private static JSONRPCResponse failure(Object id, int code, String message, String reason) {
    return JSONRPCResponse.error(id, new JSONRPCError(code, message, reason == null ? null : Map.of("reason", reason)));
  }

  /**
   * The caller's principal, or null when unknown: the source returned none,
   * a reserved one, or threw (a malformed credential, say). Such a caller's
   * retries are refused, and no state is sealed for it.
   */
  private String principalOf(McpTransportContext ctx) {
    String p;
    try {
      p = principal.apply(ctx);
    } catch (RuntimeException e) {
      log.warn("the principal source failed: {}", e.toString());
      return null;
    }
    if (p != null && p.startsWith(RESERVED_PREFIX) && !(anonymous && ANONYMOUS.equals(p))) {
      log.warn("the principal source returned a principal starting with {}: refused", RESERVED_PREFIX);
      return null;
    }
    return p == null || p.isEmpty() ? null : p;
  }

  /**
   * Whether the SDK will reach the codec with this retry: what it checks
   * before it opens a state. A retry it refuses first never spends its round.
   */
  private static boolean looksValid(Map<String, Object> params, Set<String> supportedVersions) {
    if (!(params.get("_meta") instanceof Map<?, ?> meta)
        || !(meta.get("io.modelcontextprotocol/protocolVersion") instanceof String v) || !supportedVersions.contains(v)
        || !(meta.get("io.modelcontextprotocol/clientCapabilities") instanceof Map)
        || !(meta.get("io.modelcontextprotocol/clientInfo") == null || meta.get("io.modelcontextprotocol/clientInfo") instanceof Map)) {
      return false;
    }
    Object responses = params.get("inputResponses");
    if (responses == null) {
      return true;
    }
    return responses instanceof Map<?, ?> m && m.values().stream().allMatch(Map.class::isInstance);
  }

  /** The member names of an inputRequests or inputResponses object; none for anything else. */
  private static List<String> keysOf(Object m) {
    List<String> keys = new ArrayList<>();
    if (m instanceof Map<?, ?> map) {
      map.keySet().forEach(k -> keys.add(String.valueOf(k)));
    }
    return keys;
  }

  private static <T> Mono<T> blocking(java.util.concurrent.Callable<T> call) {
    return Mono.fromCallable(call).subscribeOn(Schedulers.boundedElastic());
  }

  /** The hand-off between the guard and the SDK: see the class's comment. */
  private static final RequestStateCodec CODEC = new RequestStateCodec() {
    @Override
    public String seal(McpRequestContext ctx, String state) {
      if (!(ctx.transportContext().get(Round.KEY) instanceof Round round)) {
        throw new IllegalStateException("a requestState to seal outside SealedRequestState.guard: give the transport the guarded server");
      }
      return round.handOver(state);
    }

    @Override
    public String open(McpRequestContext ctx, String sealed) {
      return ctx.transportContext().get(Round.KEY) instanceof Round round ? round.open(sealed) : null;
    }
  };

  /** Builds a {@link SealedRequestState}. */
  public static final class Builder {
    private final SealerClient sealer;
    private Function<McpTransportContext, String> principal;
    private boolean anonymous;
    private boolean oneTime;
    private final Set<String> oneTimeTools = new java.util.HashSet<>();
    private boolean latestOnly = true;
    private boolean recordOutcomes = true;
    private Duration ttl;
    private List<String> supportedVersions = List.of("2026-07-28");

    private Builder(SealerClient sealer) {
      this.sealer = Objects.requireNonNull(sealer, "sealer");
    }

    /**
     * Who the caller is, from the transport context its transport's context
     * extractor filled after authenticating it: null or "" when unknown
     * (such a caller's retries are refused).
     */
    public Builder principal(Function<McpTransportContext, String> principal) {
      this.principal = Objects.requireNonNull(principal, "principal");
      return this;
    }

    /** Binds every state to {@link #ANONYMOUS}: for a server whose callers are not authenticated. */
    public Builder allowAnonymous() {
      this.anonymous = true;
      return this;
    }

    /** Whether every state opens at most once (default false). */
    public Builder oneTime(boolean oneTime) {
      this.oneTime = oneTime;
      return this;
    }

    /** The tools whose every state opens at most once (a payment, a booking). */
    public Builder oneTimeTools(String... tools) {
      this.oneTimeTools.addAll(List.of(tools));
      return this;
    }

    /** Whether only a flow's latest round opens (default true: no rewind, no fork). */
    public Builder latestOnly(boolean latestOnly) {
      this.latestOnly = latestOnly;
      return this;
    }

    /** Whether the answers to one-time states and latest-only rounds are recorded and replayed (default true). */
    public Builder recordOutcomes(boolean recordOutcomes) {
      this.recordOutcomes = recordOutcomes;
      return this;
    }

    /**
     * The protocol versions the server supports, as given to
     * {@code McpServer.builder().supportedVersions(...)} (default: the SDK's,
     * 2026-07-28): a retry of another version is left to the server to
     * refuse, its state not opened, so that it never spends its round.
     */
    public Builder supportedVersions(List<String> versions) {
      this.supportedVersions = List.copyOf(versions);
      return this;
    }

    /** How long a state lives; unset, the sealer's default for the tenant. */
    public Builder ttl(Duration ttl) {
      this.ttl = Objects.requireNonNull(ttl, "ttl");
      return this;
    }

    /**
     * The boundary; refuses without a principal source unless anonymous
     * callers were asked for, and with both.
     */
    public SealedRequestState build() {
      if (principal == null && !anonymous) {
        throw new IllegalStateException("no principal: pass principal(...) to bind each state to its caller, "
            + "or allowAnonymous() to bind every state to \"" + ANONYMOUS + "\"");
      }
      if (principal != null && anonymous) {
        throw new IllegalStateException("principal(...) and allowAnonymous(): choose one");
      }
      if (anonymous) {
        principal = ctx -> ANONYMOUS;
      }
      return new SealedRequestState(this);
    }
  }
}
