package io.github.mcpsealer;

import static io.github.mcpsealer.RealSealerTest.digest;
import static io.github.mcpsealer.RealSealerTest.refused;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.mcpsealer.RealSealerTest.Wire;
import io.github.mcpsealer.SealerException.Cause;
import io.github.mcpsealer.testing.SealerProcess;
import io.github.mcpsealer.testing.TestCerts;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import sealer.v1.SealerOuterClass.Binding;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.SealRequest;

/**
 * The client against the real sealer over TLS and mutual TLS, with bearer
 * tokens, over gRPC and REST alike: two tenants, one known by its client
 * certificate and one by its token, and the ways TLS goes wrong.
 */
@Tag("integration")
class RealSealerTlsTest {
  static final Binding WEATHER = digest("weather");
  static final SealRequest SEAL = SealRequest.newBuilder().setPrincipal("alice").setRequest(WEATHER).build();
  static final String TOKEN = "java-client-token-" + Long.toHexString(System.nanoTime());

  static Path dir;
  static TestCerts certs;
  static SealerProcess sealer;

  // Started by the first test, as in RealSealerTest.
  @BeforeEach
  void start() throws IOException {
    if (sealer != null) {
      return;
    }
    SealerProcess.binary(); // skips, or fails in CI, before anything is made
    dir = Files.createTempDirectory("sealer-tls-");
    certs = TestCerts.create(dir);
    Path tenants = tenants(dir, "tenants:\n"
        + "  weather:\n    mtls:\n      uris: [\"" + TestCerts.CLIENT_URI + "\"]\n"
        + "  billing:\n    tokens:\n      - sha256:" + sha256(TOKEN) + "\n");
    List<String> flags = new ArrayList<>(certs.sealerFlags());
    flags.addAll(List.of("--tenants", tenants.toString()));
    sealer = SealerProcess.start(flags.toArray(String[]::new));
  }

  @AfterAll
  static void stop() throws IOException {
    if (sealer != null) {
      sealer.close();
      sealer = null;
    }
    if (dir != null) {
      try (var files = Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
      dir = null;
    }
  }

  static Path tenants(Path dir, String yaml) throws IOException {
    return Files.writeString(dir.resolve("tenants-" + System.nanoTime() + ".yaml"), yaml);
  }

  static String sha256(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new AssertionError(e);
    }
  }

  static SealerClient.Builder to(Wire wire, String url) {
    return wire == Wire.GRPC ? SealerClient.grpc(url) : SealerClient.rest(url);
  }

  static String url(Wire wire) {
    return wire == Wire.GRPC ? sealer.grpcUrl() : sealer.restUrl();
  }

  static OpenRequest open(String state) {
    return OpenRequest.newBuilder().setRequestState(state).setPrincipal("alice").setRequest(WEATHER).build();
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void mutualTlsAndBearerTokens(Wire wire) {
    assertTrue(url(wire).startsWith("https://"), url(wire));
    Tls ca = Tls.trusting(certs.ca());
    try (SealerClient weather = to(wire, url(wire)).tls(ca.withClientCertificate(certs.clientCert(), certs.clientKey())).build();
        SealerClient billing = to(wire, url(wire)).tls(ca).token(TOKEN).build();
        SealerClient stranger = to(wire, url(wire)).tls(ca).token("wrong-token").build()) {
      String a = weather.seal(SEAL).getRequestState();
      assertTrue(weather.open(open(a)).getPayload().isEmpty());
      String b = billing.seal(SEAL).getRequestState();
      assertEquals(0, billing.open(open(b)).getPayload().size());
      // Tenants are isolated: neither opens the other's state.
      refused(Reason.REASON_INVALID_STATE, () -> billing.open(open(a)));
      refused(Reason.REASON_INVALID_STATE, () -> weather.open(open(b)));
      SealerException e = refused(Reason.REASON_UNAUTHENTICATED, () -> stranger.seal(SEAL));
      assertTrue(e.misconfigured() && !e.retryable(), e.toString());
      assertFalse(e.getMessage().contains("wrong-token") || e.toString().contains(TOKEN));
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void anotherCaIsATlsFailure(Wire wire) throws IOException {
    Path other = Files.createDirectories(dir.resolve("other-" + wire));
    try (SealerClient c = to(wire, url(wire)).tls(Tls.trusting(TestCerts.create(other).ca())).token(TOKEN).build()) {
      SealerException e = refused(Reason.REASON_UNSPECIFIED, () -> c.seal(SEAL));
      assertEquals(Cause.TLS, e.failure(), e.toString());
      assertTrue(e.misconfigured() && !e.retryable());
      assertTrue(e.getMessage().startsWith("sealer: TLS handshake failed (") && !e.getMessage().contains("\n"), e.getMessage());
      assertFalse(e.getMessage().contains(TOKEN));
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void aNameTheCertificateDoesNotHoldIsATlsFailure(Wire wire) {
    // The certificate names 127.0.0.1 and sealer.test, not localhost.
    String localhost = url(wire).replace("127.0.0.1", "localhost");
    try (SealerClient c = to(wire, localhost).tls(Tls.trusting(certs.ca())).token(TOKEN).build()) {
      SealerException e = refused(Reason.REASON_UNSPECIFIED, () -> c.seal(SEAL));
      assertEquals(Cause.TLS, e.failure(), e.toString());
      assertTrue(e.misconfigured());
    }
  }

  @Test
  void plaintextToTheTlsPort() {
    // REST: the sealer answers a plaintext request on its TLS port with a
    // 400 that is not its error body: misconfigured, never retried.
    try (SealerClient c = SealerClient.rest(sealer.restUrl().replace("https://", "http://")).build()) {
      SealerException e = refused(Reason.REASON_UNSPECIFIED, () -> c.seal(SEAL));
      assertEquals(Cause.HTTP_STATUS, e.failure(), e.toString());
      assertEquals(400, e.code());
      assertTrue(e.misconfigured());
    }
    // gRPC: the sealer drops the connection, which looks like any dropped
    // connection: unreachable, tried again within the deadline.
    try (SealerClient c = SealerClient.grpc(sealer.grpcUrl().replace("https://", "http://")).attempts(2).build()) {
      SealerException e = refused(Reason.REASON_UNSPECIFIED, () -> c.seal(SEAL));
      assertEquals(Cause.UNREACHABLE, e.failure(), e.toString());
      assertTrue(e.unavailable());
    }
  }

  @ParameterizedTest
  @EnumSource(Wire.class)
  void aTokenOverPlaintextOffLoopbackIsRefused(Wire wire) throws IOException {
    // An address of this host that is not loopback, when it has one: the
    // sealer could be reached there; the token must not go.
    String host = nonLoopbackAddress();
    String port = url(wire).substring(url(wire).lastIndexOf(':') + 1);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> to(wire, "http://" + host + ":" + port).token(TOKEN).build());
    assertTrue(e.getMessage().contains("plaintext"), e.getMessage());
    assertFalse(e.getMessage().contains(TOKEN));
  }

  @Test
  void aTokenOverPlaintextToLoopbackIsTaken() throws IOException {
    Path tenants = tenants(dir, "tenants:\n  billing:\n    tokens:\n      - sha256:" + sha256(TOKEN) + "\n");
    try (SealerProcess plain = SealerProcess.start("--tenants", tenants.toString())) {
      for (Wire wire : Wire.values()) {
        try (SealerClient billing = wire.to(plain).token(TOKEN).build();
            SealerClient stranger = wire.to(plain).token("wrong-token").build()) {
          String state = billing.seal(SEAL).getRequestState();
          assertTrue(billing.open(open(state)).getPayload().isEmpty());
          refused(Reason.REASON_UNAUTHENTICATED, () -> stranger.seal(SEAL));
        }
      }
    }
  }

  /** This host's address toward the outside, or a documentation address when it has none. */
  static String nonLoopbackAddress() throws IOException {
    try (DatagramSocket s = new DatagramSocket()) {
      s.connect(new InetSocketAddress(InetAddress.getByName("192.0.2.1"), 9)); // sends nothing: picks a route
      InetAddress a = s.getLocalAddress();
      return a.isLoopbackAddress() || a.isAnyLocalAddress() ? "192.0.2.2" : a.getHostAddress();
    } catch (IOException e) {
      return "192.0.2.2";
    }
  }
}
