package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Struct;
import com.google.protobuf.util.Durations;
import com.google.protobuf.util.JsonFormat;
import com.google.protobuf.util.Timestamps;
import io.github.mcpsealer.SealerException.Cause;
import io.github.mcpsealer.testing.Ports;
import io.github.mcpsealer.testing.SealerProcess;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import sealer.v1.SealerOuterClass.Binding;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The client against the real sealer binary, over gRPC and REST alike: a
 * round trip, the refusals as typed reasons, a recorded outcome replayed,
 * an unreachable sealer.
 */
@Tag("integration")
class RealSealerTest {
  /** The two ways to the sealer. */
  enum Wire {
    GRPC, REST;

    SealerClient.Builder to(SealerProcess s) {
      return this == GRPC ? SealerClient.grpc(s.grpcUrl()) : SealerClient.rest(s.restUrl());
    }
  }

  static SealerProcess sealer;

  // Started by the first test, so that a missing binary skips (or, in CI,
  // fails) each test where it shows, rather than the class unseen.
  @BeforeEach
  void start() {
    if (sealer == null) {
      sealer = SealerProcess.start();
    }
  }

  @AfterAll
  static void stop() {
    if (sealer != null) {
      sealer.close();
      sealer = null;
    }
  }

  static Struct json(String text) {
    Struct.Builder b = Struct.newBuilder();
    try {
      JsonFormat.parser().merge(text, b);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(e);
    }
    return b.build();
  }

  /** A binding of the caller's own: 32 bytes. */
  static Binding digest(String of) {
    try {
      return Binding.newBuilder().setDigest(ByteString.copyFrom(MessageDigest.getInstance("SHA-256").digest(of.getBytes()))).build();
    } catch (NoSuchAlgorithmException e) {
      throw new AssertionError(e);
    }
  }

  static SealerException refused(Reason reason, Executable call) {
    SealerException e = assertThrows(SealerException.class, call);
    assertEquals(reason, e.reason(), () -> "got " + e + ", want " + reason);
    return e;
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void sealOpenRoundTrip(Wire wire) {
    try (SealerClient c = wire.to(sealer).build()) {
      Binding first = Binding.newBuilder().setMethod("tools/call")
          .setParams(json("{\"name\":\"get_weather\",\"arguments\":{\"location\":\"New York\",\"days\":3}}")).build();
      SealResponse sealed = c.seal(SealRequest.newBuilder().setPrincipal("alice").setRequest(first)
          .setPayload(ByteString.copyFromUtf8("{\"step\":1}")).setTtl(Durations.fromSeconds(60)).build());
      assertFalse(sealed.getRequestState().isEmpty());
      assertFalse(sealed.hasFlow());
      Duration left = Duration.between(Instant.now(), Instant.ofEpochMilli(Timestamps.toMillis(sealed.getExpiresAt())));
      assertTrue(left.compareTo(Duration.ofSeconds(55)) > 0 && left.compareTo(Duration.ofSeconds(61)) <= 0, left.toString());
      // The retry as the MCP client sends it: members reordered, with
      // _meta, inputResponses and the state itself, which the digest ignores.
      Binding retry = Binding.newBuilder().setMethod("tools/call").setParams(json("{\"_meta\":{\"progressToken\":1},"
          + "\"arguments\":{\"days\":3,\"location\":\"New York\"},\"name\":\"get_weather\",\"inputResponses\":{},"
          + "\"requestState\":\"" + sealed.getRequestState() + "\"}")).build();
      OpenResponse opened = c.open(OpenRequest.newBuilder().setRequestState(sealed.getRequestState())
          .setPrincipal("alice").setRequest(retry).build());
      assertEquals("{\"step\":1}", opened.getPayload().toStringUtf8());
      assertEquals(sealed.getExpiresAt(), opened.getExpiresAt());
      assertFalse(opened.hasOutcome() || opened.getRecording());
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void refusalsAreTyped(Wire wire) {
    Binding weather = digest("weather " + wire);
    try (SealerClient c = wire.to(sealer).build()) {
      String state = c.seal(SealRequest.newBuilder().setPrincipal("alice").setRequest(weather).setOneTime(true).build())
          .getRequestState();
      OpenRequest open = OpenRequest.newBuilder().setRequestState(state).setPrincipal("alice").setRequest(weather).build();
      // Tampered: one character of the state changed.
      char last = state.charAt(state.length() - 1);
      String tampered = state.substring(0, state.length() - 1) + (last == 'A' ? 'B' : 'A');
      SealerException e = refused(Reason.REASON_INVALID_STATE, () -> c.open(open.toBuilder().setRequestState(tampered).build()));
      assertTrue(e.rejected() && !e.retryable(), e.toString());
      e = refused(Reason.REASON_PRINCIPAL_MISMATCH, () -> c.open(open.toBuilder().setPrincipal("mallory").build()));
      assertTrue(e.rejected());
      assertFalse(e.getMessage().contains("alice") || e.getMessage().contains("mallory") || e.getMessage().contains(state),
          e.getMessage());
      refused(Reason.REASON_REQUEST_MISMATCH, () -> c.open(open.toBuilder().setRequest(digest("another request")).build()));
      // A one-time state opens once.
      c.open(open);
      e = refused(Reason.REASON_ALREADY_CONSUMED, () -> c.open(open));
      assertTrue(e.rejected());
      // A call the sealer finds invalid: misconfigured, never retried.
      e = refused(Reason.REASON_INVALID_ARGUMENT, () -> c.seal(SealRequest.newBuilder().setPrincipal("alice")
          .setRequest(weather).setTtl(Durations.fromHours(2)).build()));
      assertTrue(e.misconfigured());
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void aRecordedOutcomeIsReplayed(Wire wire) {
    Binding pay = digest("pay " + wire);
    ByteString answers = digest("answers").getDigest();
    ByteString answer = ByteString.copyFromUtf8("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}");
    try (SealerClient c = wire.to(sealer).build()) {
      String state = c.seal(SealRequest.newBuilder().setPrincipal("alice").setRequest(pay).setOneTime(true).build())
          .getRequestState();
      OpenRequest open = OpenRequest.newBuilder().setRequestState(state).setPrincipal("alice").setRequest(pay)
          .setRecordOutcome(true).setAnswers(answers).build();
      OpenResponse first = c.open(open);
      assertTrue(first.getRecording());
      RecordResponse kept = c.record(RecordRequest.newBuilder().setRequestState(state).setOutcome(answer).build());
      assertTrue(Timestamps.toMillis(kept.getKeptUntil()) > System.currentTimeMillis());
      // The retry gets the answer, the handler not run again.
      OpenResponse retry = c.open(open);
      assertEquals(answer, retry.getOutcome().getData());
      assertTrue(retry.getPayload().isEmpty() && !retry.getRecording());
      // The first record wins.
      refused(Reason.REASON_ALREADY_CONSUMED, () -> c.record(RecordRequest.newBuilder().setRequestState(state).setOutcome(answer).build()));
      // A retry with other answers never gets it.
      SealerException e = refused(Reason.REASON_OUTCOME_CONFLICT,
          () -> c.open(open.toBuilder().setAnswers(digest("other answers").getDigest()).build()));
      assertTrue(e.rejected());
      // Without record_outcome, the state stays consumed.
      refused(Reason.REASON_ALREADY_CONSUMED, () -> c.open(open.toBuilder().setRecordOutcome(false).clearAnswers().build()));
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void unreachableIsUnavailable(Wire wire) {
    String url = "http://127.0.0.1:" + Ports.closed();
    SealerClient.Builder b = wire == Wire.GRPC ? SealerClient.grpc(url) : SealerClient.rest(url);
    try (SealerClient c = b.deadline(Duration.ofSeconds(3)).build()) {
      SealerException e = refused(Reason.REASON_UNSPECIFIED,
          () -> c.seal(SealRequest.newBuilder().setPrincipal("a").setRequest(digest("x")).build()));
      assertEquals(Cause.UNREACHABLE, e.failure(), e.toString());
      assertTrue(e.unavailable() && e.retryable() && !e.rejected());
      assertEquals("unreachable", e.why());
    }
  }
}
