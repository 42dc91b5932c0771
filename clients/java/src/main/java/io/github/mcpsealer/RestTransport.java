package io.github.mcpsealer;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import io.github.mcpsealer.SealerException.Cause;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import javax.net.ssl.SSLException;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The sealer over REST: the grpc-gateway mapping ({@code POST /v1/seal},
 * {@code /v1/open} and {@code /v1/record} with the proto's JSON, bytes as
 * base64), with the JDK's HttpClient.
 */
final class RestTransport implements Transport {
  private static final String ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo";
  private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
  private static final JsonFormat.Printer PRINTER = JsonFormat.printer().omittingInsignificantWhitespace();
  private static final JsonFormat.Parser PARSER = JsonFormat.parser().ignoringUnknownFields();

  private final URI base;
  private final HttpClient http;
  private final Supplier<String> token;

  RestTransport(Endpoint endpoint, Tls tls, Supplier<String> token) {
    this.base = URI.create(endpoint.url());
    HttpClient.Builder b = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1);
    if (tls != null) {
      b.sslContext(tls.sslContext());
    }
    this.http = b.build();
    this.token = token;
  }

  @Override
  public SealResponse seal(SealRequest request, Duration timeout) {
    return post("/v1/seal", request, SealResponse.newBuilder(), timeout);
  }

  @Override
  public OpenResponse open(OpenRequest request, Duration timeout) {
    return post("/v1/open", request, OpenResponse.newBuilder(), timeout);
  }

  @Override
  public RecordResponse record(RecordRequest request, Duration timeout) {
    return post("/v1/record", request, RecordResponse.newBuilder(), timeout);
  }

  @SuppressWarnings("unchecked")
  private <M extends Message> M post(String path, Message request, Message.Builder reply, Duration timeout) {
    HttpResponse<byte[]> res = exchange(path, request, timeout);
    int status = res.statusCode();
    JsonNode parsed;
    try {
      parsed = JSON.readTree(res.body());
    } catch (IOException e) {
      parsed = null;
    }
    if (parsed == null || parsed.isMissingNode()) {
      throw SealerException.failure(Cause.HTTP_STATUS, status, "sealer: HTTP " + status + " without a JSON body");
    }
    if (status != 200) {
      throw failure(status, parsed);
    }
    try {
      PARSER.merge(new String(res.body(), StandardCharsets.UTF_8), reply);
    } catch (InvalidProtocolBufferException | RuntimeException e) {
      throw SealerException.failure(Cause.NOT_THE_SEALER, status, "sealer: the reply is not the sealer's");
    }
    return (M) reply.build();
  }

  /** One POST, bounded by timeout as a whole: connecting, sending, and reading the reply to its end. */
  private HttpResponse<byte[]> exchange(String path, Message request, Duration timeout) {
    String body;
    try {
      body = PRINTER.print(request);
    } catch (InvalidProtocolBufferException e) {
      throw SealerException.invalidArgument("the request cannot be written as JSON");
    }
    HttpRequest.Builder req = HttpRequest.newBuilder(base.resolve(path))
        .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
        .header("content-type", "application/json")
        // The call's deadline, as a gRPC client sends it (the gateway reads
        // it): a retry waiting for an outcome gets IN_PROGRESS within it.
        .header("grpc-timeout", grpcTimeout(timeout))
        .timeout(timeout);
    String t = RetryingClient.tokenOf(token);
    if (t != null) {
      req.header("authorization", "Bearer " + t);
    }
    CompletableFuture<HttpResponse<byte[]>> pending = http.sendAsync(req.build(), LimitedBody.handler(RetryingClient.MAX_REPLY));
    try {
      // HttpClient's timeout ends with the headers: a reply that trickles
      // in would outlive it. The deadline is the exchange's.
      return pending.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      pending.cancel(true);
      throw SealerException.failure(Cause.DEADLINE, 0, "sealer: deadline exceeded");
    } catch (InterruptedException e) {
      pending.cancel(true);
      throw SealerException.interrupted();
    } catch (ExecutionException e) {
      throw failure(e.getCause() == null ? e : e.getCause());
    }
  }

  /** Maps a failed exchange to a SealerException: too large, a deadline, TLS, or unreachable. */
  static SealerException failure(Throwable e) {
    List<Throwable> chain = new ArrayList<>(List.of(e));
    chain.addAll(GrpcTransport.causes(e));
    SealerException out;
    LimitedBody.TooLarge tooLarge = first(chain, LimitedBody.TooLarge.class);
    if (tooLarge != null) {
      out = SealerException.failure(Cause.NOT_THE_SEALER, tooLarge.status(), "sealer: the reply is too large");
    } else if (first(chain, HttpTimeoutException.class) != null) {
      out = SealerException.failure(Cause.DEADLINE, 0, "sealer: deadline exceeded");
    } else if (first(chain, SSLException.class) != null || GrpcTransport.tlsFailure(e)) {
      Throwable root = chain.get(chain.size() - 1);
      String why = root.getMessage() == null ? "certificate, CA or server name" : GrpcTransport.firstLine(root.getMessage());
      out = SealerException.failure(Cause.TLS, 0, "sealer: TLS handshake failed (" + why + ")");
    } else {
      out = SealerException.failure(Cause.UNREACHABLE, 0, "sealer: unreachable (" + e.getClass().getSimpleName() + ")");
    }
    out.initCause(e);
    return out;
  }

  private static <T> T first(List<Throwable> chain, Class<T> type) {
    return chain.stream().filter(type::isInstance).map(type::cast).findFirst().orElse(null);
  }

  /** Maps a gateway error body ({code, message, details: [ErrorInfo...]}) to a SealerException. */
  static SealerException failure(int status, JsonNode body) {
    Reason reason = Reason.REASON_UNSPECIFIED;
    String message = "HTTP " + status;
    if (body.isObject()) {
      JsonNode m = body.get("message");
      if (m != null && m.isTextual() && !m.asText().isEmpty()) {
        message = m.asText().length() > 512 ? m.asText().substring(0, 512) : m.asText();
      }
      JsonNode details = body.get("details");
      if (details != null && details.isArray()) {
        for (JsonNode d : details) {
          if (d.isObject() && ERROR_INFO.equals(d.path("@type").asText(null))
              && GrpcTransport.DOMAIN.equals(d.path("domain").asText(null))) {
            reason = SealerException.reasonOf(d.path("reason").asText(null));
            break;
          }
        }
      }
    }
    Cause cause = reason == Reason.REASON_UNSPECIFIED ? Cause.HTTP_STATUS : Cause.NONE;
    return new SealerException(reason, cause, status, message.startsWith("sealer") ? message : "sealer: " + message);
  }

  /** A deadline as gRPC's grpc-timeout header writes it: whole milliseconds, at most 8 digits. */
  static String grpcTimeout(Duration timeout) {
    long ms = (timeout.toNanos() + 999_999) / 1_000_000;
    return Math.min(Math.max(ms, 1), 99_999_999) + "m";
  }

  @Override
  public void close() {
    // HttpClient has no close before Java 21: its idle connections end with it.
  }
}
