package io.github.mcpsealer;

import static io.github.mcpsealer.GrpcClientTest.OPEN;
import static io.github.mcpsealer.GrpcClientTest.SEAL;
import static io.github.mcpsealer.GrpcClientTest.exactlyOne;
import static io.github.mcpsealer.GrpcClientTest.refused;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.util.JsonFormat;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.github.mcpsealer.SealerException.Cause;
import io.github.mcpsealer.testing.Ports;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.SealRequest;

/**
 * The REST client against a tiny HTTP server that answers what a sealer
 * would, and what a proxy or another service before it might: pages, 404s,
 * huge or trickling bodies.
 */
class RestClientTest {
  /** A request as the server got it. */
  record Seen(String method, String path, String contentType, String grpcTimeout, String authorization, String body) {}

  /** What the server answers to the n-th request (from 1). */
  interface Answer {
    void answer(HttpExchange x, int n) throws IOException;
  }

  HttpServer server;
  volatile Answer answer;
  final List<Seen> seen = new CopyOnWriteArrayList<>();

  @BeforeEach
  void start() throws IOException {
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.setExecutor(Executors.newCachedThreadPool());
    server.createContext("/", x -> {
      try (x) {
        String body = new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        seen.add(new Seen(x.getRequestMethod(), x.getRequestURI().getPath(),
            x.getRequestHeaders().getFirst("content-type"), x.getRequestHeaders().getFirst("grpc-timeout"),
            x.getRequestHeaders().getFirst("authorization"), body));
        answer.answer(x, seen.size());
      } catch (IOException e) {
        // the client went away
      }
    });
    server.start();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  SealerClient client(int attempts) {
    return SealerClient.rest(url()).attempts(attempts).backoff(Duration.ZERO).build();
  }

  static void reply(HttpExchange x, int status, String contentType, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("content-type", contentType);
    x.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
    x.getResponseBody().write(b);
  }

  /** An error body as the gateway writes it. */
  static String gatewayError(int code, String message, String reason, String domain) {
    return "{\"code\":" + code + ", \"message\":\"" + message + "\", \"details\":[{\"@type\":"
        + "\"type.googleapis.com/google.rpc.ErrorInfo\", \"reason\":\"" + reason + "\", \"domain\":\"" + domain
        + "\", \"metadata\":{}}]}";
  }

  static final String PROXY_PAGE = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";

  @ParameterizedTest
  @CsvSource({
    // status, reason, calls with 3 attempts
    "400, INVALID_STATE, 1",
    "409, ALREADY_CONSUMED, 1",
    "503, LEDGER_UNAVAILABLE, 3",
    "401, UNAUTHENTICATED, 1",
    "500, INTERNAL, 1",
  })
  void theSealersErrorBody(int status, String reason, int calls) {
    answer = (x, n) -> reply(x, status, "application/json", gatewayError(3, "sealer: x", reason, "sealer.mcp"));
    SealerException e = refused(() -> client(3).open(OPEN));
    assertEquals(Reason.valueOf("REASON_" + reason), e.reason());
    assertEquals(Cause.NONE, e.failure());
    assertEquals(status, e.code());
    assertEquals(calls, seen.size());
    exactlyOne(e);
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
    // status | content type | body | retried | unavailable
    "502 | text/html | " + PROXY_PAGE + " | true | true",
    "503 | text/plain | upstream connect error | true | true",
    "504 | text/html | <html>Gateway Timeout</html> | true | true",
    "500 | text/html | <html>Internal Server Error</html> | false | true",
    "404 | text/html | <html>404 page not found</html> | false | false",
    "404 | application/json | {\"code\":5, \"message\":\"Not Found\", \"details\":[]} | false | false",
    "403 | application/json | {\"error\":\"forbidden\"} | false | false",
    "400 | application/json | " + "{\"code\":3, \"message\":\"m\", \"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\", \"reason\":\"EXPIRED\", \"domain\":\"example.com\"}]}" + " | false | false",
    // A 200 that is not JSON: another service.
    "200 | text/html | <html>welcome</html> | false | false",
  })
  void statusesWithoutTheSealersBody(int status, String type, String body, boolean retried, boolean unavailable) {
    answer = (x, n) -> reply(x, status, type, body);
    SealerException e = refused(() -> client(3).seal(SEAL));
    assertEquals(Reason.REASON_UNSPECIFIED, e.reason());
    assertEquals(Cause.HTTP_STATUS, e.failure());
    assertEquals(status, e.code());
    assertEquals("HTTP " + status, e.why());
    assertEquals(retried, e.retryable());
    assertEquals(unavailable, e.unavailable());
    exactlyOne(e);
    assertEquals(retried ? 3 : 1, seen.size());
    // A page is never quoted.
    assertFalse(e.getMessage().contains("nginx") || e.getMessage().contains("<html>"), e.getMessage());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
    "{}",
    "{\"expiresAt\":\"not a time\", \"requestState\":\"AQ\"}",
    "{\"requestState\":{\"a\":1}}",
    "null",
    "[1,2]",
  })
  void a200ThatIsNotTheSealers(String body) {
    answer = (x, n) -> reply(x, 200, "application/json", body);
    SealerException e = refused(() -> client(3).seal(SEAL));
    assertEquals(Cause.NOT_THE_SEALER, e.failure(), e.toString());
    assertTrue(e.misconfigured());
    assertEquals(1, seen.size());
  }

  @Test
  void theGatewaysRepliesAndRequests() throws Exception {
    answer = (x, n) -> reply(x, 200, "application/json", switch (x.getRequestURI().getPath()) {
      // As the gateway writes them: every field, null for none.
      case "/v1/seal" -> "{\"requestState\":\"AQAAAAHwSQi\", \"expiresAt\":\"2026-12-07T22:35:51.802Z\", \"flow\":null}";
      case "/v1/open" -> "{\"payload\":\"eyJzdGVwIjoxfQ==\",\"issuedAt\":\"2026-12-02T05:33:37.402Z\","
          + "\"expiresAt\":\"2026-12-02T05:38:37.402Z\",\"flow\":null,\"outcome\":null,\"recording\":false,\"later\":1}";
      default -> "{\"keptUntil\":\"2026-12-02T05:38:37Z\"}";
    });
    String token = "a-loopback-token";
    try (SealerClient c = SealerClient.rest(url()).token(token).deadline(Duration.ofSeconds(4)).build()) {
      SealRequest seal = SEAL.toBuilder().setPayload(com.google.protobuf.ByteString.copyFromUtf8("{\"step\":1}"))
          .setTtl(com.google.protobuf.util.Durations.fromSeconds(300)).setOneTime(true).build();
      assertEquals("AQAAAAHwSQi", c.seal(seal).getRequestState());
      assertEquals("{\"step\":1}", c.open(OPEN).getPayload().toStringUtf8());
      c.record(RecordRequest.newBuilder().setRequestState("AQ").build());
    }
    assertEquals(List.of("/v1/seal", "/v1/open", "/v1/record"), seen.stream().map(Seen::path).toList());
    for (Seen s : seen) {
      assertEquals("POST", s.method());
      assertEquals("application/json", s.contentType());
      assertEquals("Bearer " + token, s.authorization());
      long ms = Long.parseLong(s.grpcTimeout().substring(0, s.grpcTimeout().length() - 1));
      assertTrue(s.grpcTimeout().endsWith("m") && ms > 0 && ms <= 4000, s.grpcTimeout());
    }
    // The proto's JSON, as the gateway reads it (camelCase, bytes as base64).
    String body = seen.get(0).body();
    assertTrue(body.contains("\"oneTime\":true") && body.contains("\"ttl\":\"300s\""), body);
    SealRequest.Builder back = SealRequest.newBuilder();
    JsonFormat.parser().merge(body, back);
    assertEquals("{\"step\":1}", back.getPayload().toStringUtf8());
    assertEquals(SEAL.getRequest(), back.getRequest());
  }

  @Test
  void aHugeReplyIsRefusedUnread() {
    // Announced by its length.
    answer = (x, n) -> {
      x.sendResponseHeaders(200, RetryingClient.MAX_REPLY + 1L);
      OutputStream out = x.getResponseBody();
      out.write(new byte[RetryingClient.MAX_REPLY + 1]);
    };
    SealerException e = refused(() -> client(3).seal(SEAL));
    assertEquals(Cause.NOT_THE_SEALER, e.failure());
    assertEquals(200, e.code());
    assertTrue(e.getMessage().contains("too large"));
    assertEquals(1, seen.size());
    // Chunked, without a length: refused once it grows past the limit.
    seen.clear();
    answer = (x, n) -> {
      x.sendResponseHeaders(502, 0);
      OutputStream out = x.getResponseBody();
      byte[] chunk = new byte[64 << 10];
      for (int i = 0; i < 64; i++) {
        out.write(chunk);
      }
    };
    e = refused(() -> client(3).seal(SEAL));
    assertEquals(Cause.NOT_THE_SEALER, e.failure());
    assertEquals(502, e.code());
    assertEquals(1, seen.size());
  }

  @Test
  void aTricklingReplyCostsOneDeadline() {
    answer = (x, n) -> {
      x.sendResponseHeaders(200, 1000);
      OutputStream out = x.getResponseBody();
      try {
        for (int i = 0; i < 1000; i++) {
          out.write('{');
          out.flush();
          Thread.sleep(100);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    };
    SealerClient c = SealerClient.rest(url()).deadline(Duration.ofMillis(500)).attempts(5).build();
    SealerException e = assertTimeoutPreemptively(Duration.ofSeconds(10), () -> refused(() -> c.seal(SEAL)));
    assertEquals(Cause.DEADLINE, e.failure());
    assertTrue(e.unavailable());
    assertEquals(1, seen.size());
  }

  @Test
  void unreachable() {
    SealerClient c = SealerClient.rest("http://127.0.0.1:" + Ports.closed()).attempts(2).backoff(Duration.ZERO).build();
    SealerException e = refused(() -> c.seal(SEAL));
    assertEquals(Cause.UNREACHABLE, e.failure(), e.toString());
    assertTrue(e.retryable() && e.unavailable());
  }

  @Test
  void tlsToAPlaintextServerIsATlsFailure() throws Exception {
    // A plaintext HTTP server answers a ClientHello as a bad request, as Go's does.
    try (ServerSocket plain = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
      Thread t = new Thread(() -> {
        while (!plain.isClosed()) {
          try (Socket s = plain.accept()) {
            s.getInputStream().read(new byte[512]);
            s.getOutputStream().write("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
          } catch (IOException e) {
            // closed
          }
        }
      });
      t.setDaemon(true);
      t.start();
      SealerClient c = SealerClient.rest("https://127.0.0.1:" + plain.getLocalPort()).attempts(3).build();
      SealerException e = refused(() -> c.seal(SEAL));
      assertEquals(Cause.TLS, e.failure(), e.toString());
      assertTrue(e.misconfigured());
      assertFalse(e.retryable());
    }
  }

  @Test
  void grpcTimeoutHeader() {
    assertEquals("1m", RestTransport.grpcTimeout(Duration.ofNanos(1)));
    assertEquals("1500m", RestTransport.grpcTimeout(Duration.ofMillis(1500)));
    assertEquals("1501m", RestTransport.grpcTimeout(Duration.ofNanos(1_500_000_001)));
    assertEquals("99999999m", RestTransport.grpcTimeout(Duration.ofDays(30)));
  }
}
