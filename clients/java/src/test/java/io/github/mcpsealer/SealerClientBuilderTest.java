package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.mcpsealer.testing.TestCerts;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** What build() refuses: addresses that are not the sealer's, and a token that would go in the clear. */
class SealerClientBuilderTest {
  static final String TOKEN = "a-token-never-shown";

  static final List<String> OFF_LOOPBACK = List.of(
      "http://10.0.0.7:7443",
      "http://192.0.2.2:7443",
      "http://[fd00::2]:7443",
      "http://[::ffff:10.0.0.7]:7443",
      "http://sealer.internal:7443",
      "http://localhost.example.com:7443",
      "http://127.0.0.1.nip.io:7443",
      "http://0.0.0.0:7443");
  static final List<String> LOOPBACK = List.of(
      "http://127.0.0.1:7443", "http://127.8.9.10:7443", "http://[::1]:7443", "http://localhost:7443",
      "http://LocalHost:7443", "http://[::ffff:127.0.0.1]:7443");

  static Stream<Function<String, SealerClient.Builder>> transports() {
    return Stream.of(SealerClient::grpc, SealerClient::rest);
  }

  static Stream<Arguments> each(List<String> urls) {
    return transports().flatMap(t -> urls.stream().map(u -> Arguments.of(t, u)));
  }

  static Stream<Arguments> offLoopback() {
    return each(OFF_LOOPBACK);
  }

  static Stream<Arguments> loopback() {
    return each(LOOPBACK);
  }

  static Stream<Arguments> badUrls() {
    return each(List.of("http://127.0.0.1", "ftp://127.0.0.1:1", "http://127.0.0.1:1/sealer", "http://127.0.0.1:1/?x=1",
        "http://127.0.0.1:1#f", "127.0.0.1:1", "http://user:pw@127.0.0.1:1", "http://:1", ""));
  }

  @ParameterizedTest
  @MethodSource("badUrls")
  void urlsThatAreNotTheSealers(Function<String, SealerClient.Builder> transport, String url) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> transport.apply(url).build());
    assertTrue(e.getMessage().contains("URL"), e.getMessage());
    assertFalse(e.getMessage().contains("pw"));
    assertFalse(transport.apply(url).toString().contains("pw"));
  }

  @ParameterizedTest
  @MethodSource("transports")
  void tlsNeedsHttps(Function<String, SealerClient.Builder> transport) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> transport.apply("http://127.0.0.1:7443").tls(Tls.system()).build());
    assertTrue(e.getMessage().contains("https"), e.getMessage());
  }

  @ParameterizedTest
  @MethodSource("offLoopback")
  void aTokenOverPlaintextOffLoopbackIsRefused(Function<String, SealerClient.Builder> transport, String url) {
    for (SealerClient.Builder b : List.of(transport.apply(url).token(TOKEN), transport.apply(url).tokenSupplier(() -> TOKEN))) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, b::build);
      assertTrue(e.getMessage().contains("plaintext") && e.getMessage().contains("https://"), e.getMessage());
      assertFalse(e.getMessage().contains(TOKEN));
    }
    // Over TLS it goes anywhere.
    String https = url.replace("http://", "https://");
    assertDoesNotThrow(() -> transport.apply(https).token(TOKEN).build().close());
  }

  @ParameterizedTest
  @MethodSource("loopback")
  void aTokenOverPlaintextToLoopbackIsAllowed(Function<String, SealerClient.Builder> transport, String url) {
    assertDoesNotThrow(() -> transport.apply(url).token(TOKEN).build().close());
  }

  @ParameterizedTest
  @MethodSource("offLoopback")
  void plaintextWithoutATokenIsAllowed(Function<String, SealerClient.Builder> transport, String url) {
    // Nothing secret of the client's own to lose: the sealer decides (it
    // refuses plaintext off loopback itself).
    assertDoesNotThrow(() -> transport.apply(url).build().close());
  }

  @ParameterizedTest
  @MethodSource("transports")
  void theTargetAndToStringHoldNoToken(Function<String, SealerClient.Builder> transport, @TempDir Path dir) {
    TestCerts certs = TestCerts.create(dir);
    SealerClient.Builder b = transport.apply("https://sealer.example:7443/")
        .tls(Tls.trusting(certs.ca()).withClientCertificate(certs.clientCert(), certs.clientKey()))
        .token(TOKEN);
    assertFalse(b.toString().contains(TOKEN), b.toString());
    try (SealerClient c = b.build()) {
      assertEquals("https://sealer.example:7443", c.target());
      assertFalse(c.toString().contains(TOKEN));
    }
    try (SealerClient c = transport.apply("http://[::1]:7080").build()) {
      assertEquals("http://[::1]:7080", c.target());
    }
  }

  @Test
  void optionsOutOfRange() {
    SealerClient.Builder b = SealerClient.grpc("http://127.0.0.1:7443");
    assertThrows(IllegalArgumentException.class, () -> b.deadline(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> b.deadline(Duration.ofMillis(-1)));
    assertThrows(IllegalArgumentException.class, () -> b.attempts(0));
    assertThrows(IllegalArgumentException.class, () -> b.backoff(Duration.ofMillis(-1)));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> b.token("two\nlines"));
    assertFalse(e.getMessage().contains("lines"));
    assertThrows(NullPointerException.class, () -> b.tokenSupplier(null));
  }
}
