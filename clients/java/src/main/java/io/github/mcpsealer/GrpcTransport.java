package io.github.mcpsealer;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.github.mcpsealer.SealerException.Cause;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.net.ssl.KeyManager;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManager;
import sealer.v1.SealerGrpc;
import sealer.v1.SealerGrpc.SealerBlockingStub;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/** The sealer over gRPC: grpc-java's blocking stubs, one deadline an attempt. */
final class GrpcTransport implements Transport {
  /** The domain of the ErrorInfo the sealer puts in every error. */
  static final String DOMAIN = "sealer.mcp";

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  // How a failed handshake shows in a status or its causes, besides an SSLException.
  private static final String[] TLS_MARKERS = {"ssl", "tls", "handshake", "certificate"};

  private final ManagedChannel channel;
  private final SealerBlockingStub stub;
  private final Supplier<String> token;

  GrpcTransport(ManagedChannel channel, Supplier<String> token) {
    this.channel = channel;
    this.stub = SealerGrpc.newBlockingStub(channel);
    this.token = token;
  }

  /** A transport to endpoint, over TLS when tls is not null. Nothing connects before the first call. */
  static GrpcTransport connect(Endpoint endpoint, Tls tls, Supplier<String> token) {
    ChannelCredentials creds = tls == null ? InsecureChannelCredentials.create() : credentials(tls);
    return new GrpcTransport(build(Grpc.newChannelBuilderForAddress(endpoint.bareHost(), endpoint.port(), creds)), token);
  }

  /** Builds a channel as every channel of this client is built: replies over MAX_REPLY are refused unread. */
  static ManagedChannel build(ManagedChannelBuilder<?> builder) {
    return builder.maxInboundMessageSize(RetryingClient.MAX_REPLY).build();
  }

  private static ChannelCredentials credentials(Tls tls) {
    TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
    TrustManager[] trust = tls.trustManagers();
    if (trust != null) {
      b.trustManager(trust);
    }
    KeyManager[] keys = tls.keyManagers();
    if (keys != null) {
      b.keyManager(keys);
    }
    return b.build();
  }

  @Override
  public SealResponse seal(SealRequest request, Duration timeout) {
    return call(timeout, s -> s.seal(request));
  }

  @Override
  public OpenResponse open(OpenRequest request, Duration timeout) {
    return call(timeout, s -> s.open(request));
  }

  @Override
  public RecordResponse record(RecordRequest request, Duration timeout) {
    return call(timeout, s -> s.record(request));
  }

  private <T> T call(Duration timeout, Function<SealerBlockingStub, T> rpc) {
    SealerBlockingStub s = stub.withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS);
    String t = RetryingClient.tokenOf(token);
    if (t != null) {
      Metadata headers = new Metadata();
      headers.put(AUTHORIZATION, "Bearer " + t);
      s = s.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    try {
      return rpc.apply(s);
    } catch (StatusRuntimeException e) {
      throw failure(e);
    }
  }

  /**
   * Maps a gRPC failure to a SealerException with the reason of its
   * google.rpc.ErrorInfo of domain sealer.mcp; without one (the sealer
   * unreachable, a deadline, a TLS failure, another service), its cause
   * says which.
   */
  static SealerException failure(StatusRuntimeException e) {
    Status status = e.getStatus();
    if (status.getCode() == Status.Code.CANCELLED && causedBy(e, InterruptedException.class)) {
      return SealerException.interrupted();
    }
    Reason reason = reasonOf(e);
    String details = status.getDescription();
    String message = details == null || details.isEmpty() ? status.getCode().name().toLowerCase(Locale.ROOT) : details;
    Cause cause = Cause.NONE;
    if (reason == Reason.REASON_UNSPECIFIED) {
      // grpc-java's own descriptions run over lines (a channel pipeline):
      // their first line, and what the innermost cause says.
      cause = causeOf(status, e);
      message = firstLine(message);
      Throwable root = rootCause(e);
      String why = root == null || root.getMessage() == null ? null : firstLine(root.getMessage());
      if (cause == Cause.TLS) {
        message = "TLS handshake failed (" + (why != null ? why : message) + ")";
      } else if (why != null && !message.contains(why)) {
        message += " (" + why + ")";
      }
    }
    message = message.length() > 512 ? message.substring(0, 512) : message;
    SealerException out = new SealerException(reason, cause, status.getCode().value(),
        message.startsWith("sealer") ? message : "sealer: " + message);
    out.initCause(e);
    return out;
  }

  static String firstLine(String text) {
    int end = text.indexOf('\n');
    return (end < 0 ? text : text.substring(0, end)).strip();
  }

  private static Reason reasonOf(StatusRuntimeException e) {
    com.google.rpc.Status proto;
    try {
      proto = StatusProto.fromThrowable(e);
    } catch (RuntimeException notAStatus) {
      return Reason.REASON_UNSPECIFIED;
    }
    if (proto == null) {
      return Reason.REASON_UNSPECIFIED;
    }
    for (Any detail : proto.getDetailsList()) {
      if (!detail.is(ErrorInfo.class)) {
        continue;
      }
      try {
        ErrorInfo info = detail.unpack(ErrorInfo.class);
        if (DOMAIN.equals(info.getDomain())) {
          return SealerException.reasonOf(info.getReason());
        }
      } catch (InvalidProtocolBufferException malformed) {
        // not an ErrorInfo after all: no reason from it
      }
    }
    return Reason.REASON_UNSPECIFIED;
  }

  /** What went wrong on the way, for a status without the sealer's ErrorInfo. */
  private static Cause causeOf(Status status, StatusRuntimeException e) {
    if (tlsFailure(e)) {
      return Cause.TLS;
    }
    return switch (status.getCode()) {
      case UNAVAILABLE -> Cause.UNREACHABLE;
      case DEADLINE_EXCEEDED -> Cause.DEADLINE;
      default -> Cause.NOT_THE_SEALER;
    };
  }

  /** Whether the failure came from the TLS handshake: a certificate, a CA, a name, or plaintext where TLS was expected. */
  static boolean tlsFailure(Throwable e) {
    String description = e instanceof StatusRuntimeException s ? s.getStatus().getDescription() : null;
    if (hasMarker(description)) {
      return true;
    }
    return causes(e).stream().anyMatch(t -> t instanceof SSLException || hasMarker(t.getClass().getSimpleName()));
  }

  private static boolean hasMarker(String text) {
    if (text == null) {
      return false;
    }
    String lower = text.toLowerCase(Locale.ROOT);
    for (String m : TLS_MARKERS) {
      if (lower.contains(m)) {
        return true;
      }
    }
    return false;
  }

  private static boolean causedBy(Throwable e, Class<? extends Throwable> type) {
    return causes(e).stream().anyMatch(type::isInstance);
  }

  private static Throwable rootCause(Throwable e) {
    List<Throwable> causes = causes(e);
    return causes.isEmpty() ? null : causes.get(causes.size() - 1);
  }

  /** The causes of e, outermost first; at most 16, in case they loop. */
  static List<Throwable> causes(Throwable e) {
    List<Throwable> out = new ArrayList<>();
    for (Throwable t = e.getCause(); t != null && out.size() < 16 && !out.contains(t); t = t.getCause()) {
      out.add(t);
    }
    return out;
  }

  @Override
  public void close() {
    channel.shutdown();
    try {
      if (!channel.awaitTermination(1, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }
}
