package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeout;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.util.Timestamps;
import io.github.mcpsealer.SealerException.Cause;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLHandshakeException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;
import sealer.v1.SealerOuterClass.Binding;
import sealer.v1.SealerOuterClass.Flow;
import sealer.v1.SealerOuterClass.FlowRequest;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Outcome;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The gRPC client's error paths against a Sealer service in memory: the
 * classification of every status, the retries bounded by attempts and by
 * the deadline, the replies that are not the sealer's.
 */
class GrpcClientTest {
  static final Binding DIGEST = Binding.newBuilder().setDigest(ByteString.copyFrom(new byte[32])).build();
  static final SealRequest SEAL = SealRequest.newBuilder().setPrincipal("alice").setRequest(DIGEST).build();
  static final OpenRequest OPEN =
      OpenRequest.newBuilder().setRequestState("AQ-the-state").setPrincipal("alice").setRequest(DIGEST).build();
  static final SealResponse SEALED =
      SealResponse.newBuilder().setRequestState("AQ-the-state").setExpiresAt(Timestamps.fromSeconds(2_000_000_000)).build();
  static final OpenResponse OPENED = OpenResponse.newBuilder()
      .setPayload(ByteString.copyFromUtf8("{\"step\":1}"))
      .setIssuedAt(Timestamps.fromSeconds(1_999_999_700))
      .setExpiresAt(Timestamps.fromSeconds(2_000_000_000))
      .build();

  FakeSealer fake;

  @BeforeEach
  void start() throws Exception {
    fake = new FakeSealer();
  }

  @AfterEach
  void stop() {
    fake.close();
  }

  static SealerException refused(Executable call) {
    return assertThrows(SealerException.class, call);
  }

  /** Every error is exactly one of rejected, unavailable and misconfigured. */
  static void exactlyOne(SealerException e) {
    int kinds = (e.rejected() ? 1 : 0) + (e.unavailable() ? 1 : 0) + (e.misconfigured() ? 1 : 0);
    assertEquals(1, kinds, "rejected/unavailable/misconfigured of " + e);
  }

  @ParameterizedTest
  @EnumSource(value = Reason.class, names = {"REASON_UNSPECIFIED", "UNRECOGNIZED"}, mode = EnumSource.Mode.EXCLUDE)
  void everyReasonAsItsRuleSays(Reason reason) {
    fake.answer = n -> FakeSealer.error(reason);
    SealerException e = refused(() -> fake.client(3).open(OPEN));
    assertEquals(reason, e.reason());
    assertEquals(Cause.NONE, e.failure());
    assertEquals(FakeSealer.rule(reason).getGrpcCode(), e.code());
    assertEquals(FakeSealer.rule(reason).getRejects(), e.rejected());
    assertEquals(FakeSealer.rule(reason).getRetryable(), e.retryable());
    exactlyOne(e);
    // Only a failure that may pass is tried again, up to the attempts.
    assertEquals(e.retryable() ? 3 : 1, fake.calls.size(), "calls");
  }

  @Test
  void retryableFailuresThenSuccess() {
    fake.answer = n -> n < 3 ? FakeSealer.error(Reason.REASON_LEDGER_UNAVAILABLE) : SEALED;
    assertEquals(SEALED, fake.client(3).seal(SEAL));
    assertEquals(3, fake.calls.size());
    fake.calls.forEach(c -> assertEquals(SEAL, c.request()));
  }

  @Test
  void attemptsBoundTheRetries() {
    fake.answer = n -> FakeSealer.error(Reason.REASON_RESOURCE_EXHAUSTED);
    SealerException e = refused(() -> fake.client(5).seal(SEAL));
    assertEquals(Reason.REASON_RESOURCE_EXHAUSTED, e.reason());
    assertEquals(5, fake.calls.size());
  }

  @Test
  void reasonWithItsPrefixAndUnknownReasons() {
    fake.answer = n -> FakeSealer.error("REASON_EXPIRED", GrpcTransport.DOMAIN, 9);
    assertEquals(Reason.REASON_EXPIRED, refused(() -> fake.client(1).open(OPEN)).reason());
    for (String junk : new String[] {"", "NOPE", "expired", "UNSPECIFIED", "REASON_UNSPECIFIED"}) {
      fake.answer = n -> FakeSealer.error(junk, GrpcTransport.DOMAIN, 9);
      SealerException e = refused(() -> fake.client(1).open(OPEN));
      assertEquals(Reason.REASON_UNSPECIFIED, e.reason(), junk);
      assertEquals(Cause.NOT_THE_SEALER, e.failure(), junk);
      assertTrue(e.misconfigured(), junk);
    }
  }

  @Test
  void errorInfoOfAnotherDomainIsNotTheSealers() {
    // Another service's ErrorInfo naming one of the sealer's reasons.
    fake.answer = n -> FakeSealer.error("ALREADY_CONSUMED", "example.com", 6);
    SealerException e = refused(() -> fake.client(3).open(OPEN));
    assertEquals(Reason.REASON_UNSPECIFIED, e.reason());
    assertEquals(Cause.NOT_THE_SEALER, e.failure());
    assertFalse(e.rejected());
    assertEquals(1, fake.calls.size());
  }

  @ParameterizedTest
  @CsvSource({
    "UNAVAILABLE, UNREACHABLE, 3",
    "DEADLINE_EXCEEDED, DEADLINE, 3",
    "UNIMPLEMENTED, NOT_THE_SEALER, 1",
    "INTERNAL, NOT_THE_SEALER, 1",
    "PERMISSION_DENIED, NOT_THE_SEALER, 1",
  })
  void statusesWithoutTheSealersReason(Status.Code code, Cause cause, int calls) {
    fake.answer = n -> Status.fromCode(code).withDescription("from somewhere").asRuntimeException();
    SealerException e = refused(() -> fake.client(3).seal(SEAL));
    assertEquals(Reason.REASON_UNSPECIFIED, e.reason());
    assertEquals(cause, e.failure());
    assertEquals(code.value(), e.code());
    assertEquals(calls > 1, e.retryable());
    assertEquals(calls > 1, e.unavailable());
    exactlyOne(e);
    assertEquals(calls, fake.calls.size());
    assertTrue(e.getMessage().startsWith("sealer: "), e.getMessage());
  }

  @Test
  void tlsFailuresAreMisconfiguredNeverRetried() {
    StatusRuntimeException handshake = Status.UNAVAILABLE.withDescription("io exception")
        .withCause(new SSLHandshakeException("PKIX path building failed")).asRuntimeException();
    StatusRuntimeException worded = Status.UNAVAILABLE
        .withDescription("failed to connect: Ssl handshake failed: CERTIFICATE_VERIFY_FAILED").asRuntimeException();
    for (StatusRuntimeException s : new StatusRuntimeException[] {handshake, worded}) {
      SealerException e = GrpcTransport.failure(s);
      assertEquals(Cause.TLS, e.failure(), e.toString());
      assertFalse(e.retryable());
      assertTrue(e.misconfigured());
      assertEquals("tls", e.why());
    }
  }

  @Test
  void aHungSealerCostsOneDeadline() {
    fake.answer = n -> null;
    SealerClient c = fake.client(Duration.ofMillis(300), 5, Duration.ofMillis(10), null);
    SealerException e = assertTimeoutPreemptively(Duration.ofSeconds(10), () -> refused(() -> c.seal(SEAL)));
    assertEquals(Cause.DEADLINE, e.failure());
    assertTrue(e.unavailable());
    // The first attempt was given the whole deadline: none was left for another.
    assertEquals(1, fake.calls.size());
  }

  @Test
  void backoffNeverOutlivesTheDeadline() {
    fake.answer = n -> FakeSealer.error(Reason.REASON_KEYS_UNAVAILABLE);
    SealerClient c = fake.client(Duration.ofMillis(300), 3, Duration.ofHours(1), null);
    SealerException e = assertTimeoutPreemptively(Duration.ofSeconds(10), () -> refused(() -> c.seal(SEAL)));
    assertEquals(Cause.DEADLINE, e.failure());
    assertEquals(1, fake.calls.size());
  }

  @Test
  void eachAttemptIsGivenWhatIsLeftOfTheDeadline() {
    fake.answer = n -> n < 3 ? FakeSealer.error(Reason.REASON_IN_PROGRESS) : OPENED;
    fake.client(Duration.ofSeconds(20), 3, Duration.ofMillis(100), null).open(OPEN);
    assertEquals(3, fake.calls.size());
    Duration previous = Duration.ofSeconds(20);
    for (int i = 0; i < 3; i++) {
      Duration left = fake.calls.get(i).left();
      assertNotNull(left, "every attempt has a deadline");
      // Less than before by at least the backoff slept: 100 ms, then 200 ms.
      Duration most = previous.minusMillis(i == 0 ? 0 : 100L << (i - 1));
      assertTrue(left.compareTo(most) <= 0, "attempt " + (i + 1) + ": got " + left + " left, want at most " + most);
      previous = left;
    }
  }

  @Test
  void theTokenGoesAsABearerAndIsAskedForEachAttempt() {
    AtomicInteger asked = new AtomicInteger();
    fake.answer = n -> n < 2 ? FakeSealer.error(Reason.REASON_LEDGER_UNAVAILABLE) : SEALED;
    fake.client(Duration.ofSeconds(5), 3, Duration.ZERO, () -> "tok-" + asked.incrementAndGet()).seal(SEAL);
    assertEquals("Bearer tok-1", fake.calls.get(0).authorization());
    assertEquals("Bearer tok-2", fake.calls.get(1).authorization());
    // No token: no header at all.
    fake.calls.clear();
    fake.answer = n -> SEALED;
    fake.client(1).seal(SEAL);
    assertEquals(null, fake.calls.get(0).authorization());
  }

  @Test
  void theTokenIsInNoMessage() {
    String token = "very-secret-token-123";
    fake.answer = n -> FakeSealer.error(Reason.REASON_UNAUTHENTICATED);
    SealerClient c = fake.client(Duration.ofSeconds(5), 3, Duration.ZERO, () -> token);
    SealerException e = refused(() -> c.seal(SEAL));
    assertEquals(Reason.REASON_UNAUTHENTICATED, e.reason());
    assertTrue(e.misconfigured());
    assertEquals(1, fake.calls.size());
    assertFalse(e.getMessage().contains(token) || e.toString().contains(token) || c.toString().contains(token));
    // A token a header cannot carry is refused before anything is sent, and not quoted.
    String broken = "line\r\nx-injected: 1";
    SealerException bad = refused(() -> fake.client(Duration.ofSeconds(5), 3, Duration.ZERO, () -> broken).seal(SEAL));
    assertEquals(Reason.REASON_INVALID_ARGUMENT, bad.reason());
    assertFalse(bad.getMessage().contains("injected"));
    assertEquals(1, fake.calls.size());
  }

  @Test
  void repliesThatAreNotTheSealers() {
    Outcome outcome = Outcome.newBuilder().setData(ByteString.copyFromUtf8("{}")).setRecordedAt(Timestamps.fromSeconds(1)).build();
    Object[][] cases = {
      // A 200 from something else parses as an empty message: never a result.
      {SealResponse.getDefaultInstance(), SEAL, "not the sealer's"},
      {SealResponse.newBuilder().setRequestState("AQ").build(), SEAL, "not the sealer's"},
      // A seal that asked for a flow and got none: a release without flows.
      {SEALED, SEAL.toBuilder().setFlow(FlowRequest.getDefaultInstance()).build(), "no flow"},
      {SEALED.toBuilder().setFlow(Flow.newBuilder().setRound(1).setDeadline(Timestamps.fromSeconds(1))).build(), SEAL, "malformed flow"},
      {OpenResponse.newBuilder().setPayload(ByteString.copyFromUtf8("{\"step\":2}")).build(), OPEN, "not the sealer's"},
      // An outcome answers a retry: it consumes nothing and has no payload.
      {OPENED.toBuilder().setOutcome(outcome).build(), OPEN, "not the sealer's"},
      {OPENED.toBuilder().clearPayload().setOutcome(outcome).setRecording(true).build(), OPEN, "not the sealer's"},
      {RecordResponse.getDefaultInstance(), RecordRequest.newBuilder().setRequestState("AQ").build(), "not the sealer's"},
    };
    for (Object[] c : cases) {
      fake.calls.clear();
      fake.answer = n -> c[0];
      SealerClient client = fake.client(3);
      SealerException e = refused(() -> {
        if (c[1] instanceof SealRequest s) {
          client.seal(s);
        } else if (c[1] instanceof OpenRequest o) {
          client.open(o);
        } else {
          client.record((RecordRequest) c[1]);
        }
      });
      assertEquals(Cause.NOT_THE_SEALER, e.failure(), c[0].toString());
      assertTrue(e.getMessage().contains((String) c[2]), e.getMessage());
      // Another service answered: retrying cannot help.
      assertTrue(e.misconfigured());
      assertEquals(1, fake.calls.size());
    }
    // The same replies with their fields pass.
    fake.answer = n -> OPENED.toBuilder().clearPayload().setOutcome(outcome).build();
    assertEquals(outcome, fake.client(1).open(OPEN).getOutcome());
  }

  @Test
  void anOutcomeNoSealerKeepsIsRecordedAsNone() {
    fake.answer = n -> RecordResponse.newBuilder().setKeptUntil(Timestamps.fromSeconds(2_000_000_000)).build();
    RecordRequest big = RecordRequest.newBuilder().setRequestState("AQ")
        .setOutcome(ByteString.copyFrom(new byte[RetryingClient.MAX_OUTCOME + 1])).build();
    SealerException e = refused(() -> fake.client(1).record(big));
    assertEquals(Reason.REASON_INVALID_ARGUMENT, e.reason());
    assertEquals(1, fake.calls.size());
    RecordRequest sent = (RecordRequest) fake.calls.get(0).request();
    assertEquals("AQ", sent.getRequestState());
    assertTrue(sent.getOutcome().isEmpty(), "recorded as none");
    // At the limit, as it is.
    RecordRequest limit = big.toBuilder().setOutcome(big.getOutcome().substring(1)).build();
    fake.client(1).record(limit);
    assertEquals(limit, fake.calls.get(1).request());
  }

  @Test
  void anInterruptedCallEndsAtOnce() {
    fake.answer = n -> null;
    SealerClient c = fake.client(Duration.ofSeconds(30), 3, Duration.ZERO, null);
    Thread.currentThread().interrupt();
    try {
      // Not preemptively: that would run the call in another thread.
      SealerException e = assertTimeout(Duration.ofSeconds(10), () -> refused(() -> c.seal(SEAL)));
      assertEquals(Cause.DEADLINE, e.failure());
      assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
      assertTrue(Thread.currentThread().isInterrupted(), "the interrupt is kept");
      assertTrue(fake.calls.size() <= 1);
    } finally {
      Thread.interrupted();
    }
  }

  @Test
  void aClosedClientRefusesCalls() {
    SealerClient c = fake.client(1);
    c.close();
    c.close();
    assertThrows(IllegalStateException.class, () -> c.seal(SEAL));
    assertEquals(0, fake.calls.size());
  }

  @Test
  void aReplyOverTheLimitIsRefusedUnread() throws Exception {
    // Over a real socket: the in-process transport passes messages without
    // serializing them, so it never meets the size limit.
    FakeSealer big = fake;
    big.answer = n -> OPENED.toBuilder().setPayload(ByteString.copyFrom(new byte[RetryingClient.MAX_REPLY + 1])).build();
    Server server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(big).maxInboundMessageSize(1 << 20).build().start();
    try (SealerClient c = SealerClient.grpc("http://127.0.0.1:" + server.getPort()).build()) {
      SealerException e = refused(() -> c.open(OPEN));
      assertEquals(Cause.NOT_THE_SEALER, e.failure(), e.toString());
      assertEquals(Status.Code.RESOURCE_EXHAUSTED.value(), e.code());
      assertEquals(1, big.calls.size());
      // Just under it, the same call passes.
      big.answer = n -> OPENED.toBuilder().setPayload(ByteString.copyFrom(new byte[RetryingClient.MAX_REPLY - 64])).build();
      assertEquals(RetryingClient.MAX_REPLY - 64, c.open(OPEN).getPayload().size());
    } finally {
      server.shutdownNow();
    }
  }
}
