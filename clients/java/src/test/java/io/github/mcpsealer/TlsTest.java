package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.mcpsealer.testing.TestCerts;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** TLS options, read and checked when they are made, not at the first call. */
class TlsTest {
  @TempDir Path dir;

  @Test
  void theFilesAreReadWhenMade() throws Exception {
    TestCerts certs = TestCerts.create(dir);
    Tls tls = Tls.trusting(certs.ca()).withClientCertificate(certs.clientCert(), certs.clientKey());
    assertTrue(tls.mutual());
    assertFalse(tls.trustsSystem());
    assertEquals(1, tls.trustManagers().length);
    assertEquals(1, tls.keyManagers().length);
    String key = Files.readString(certs.clientKey());
    String body = key.lines().filter(l -> !l.startsWith("-----")).findFirst().orElseThrow();
    assertFalse(tls.toString().contains(body), tls.toString());
    Tls system = Tls.system();
    assertTrue(system.trustsSystem());
    assertNull(system.trustManagers());
  }

  @Test
  void aMissingFileFailsAtOnce() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Tls.trusting(dir.resolve("missing.pem")));
    assertTrue(e.getMessage().contains("cannot read"), e.getMessage());
  }

  @Test
  void filesThatHoldNoCertificate() throws Exception {
    Path junk = Files.writeString(dir.resolve("junk.pem"), "not a certificate\n");
    assertThrows(IllegalArgumentException.class, () -> Tls.trusting(junk));
    TestCerts certs = TestCerts.create(dir);
    assertThrows(IllegalArgumentException.class, () -> Tls.system().withClientCertificate(certs.clientKey(), certs.clientKey()));
  }

  @Test
  void onlyPkcs8Keys() throws Exception {
    TestCerts certs = TestCerts.create(dir);
    String pkcs8 = Files.readString(certs.clientKey());
    // The same bytes under a SEC 1 label: refused, with how to convert it.
    Path sec1 = Files.writeString(dir.resolve("sec1.pem"), pkcs8.replace("PRIVATE KEY", "EC PRIVATE KEY"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Tls.system().withClientCertificate(certs.clientCert(), sec1));
    assertTrue(e.getMessage().contains("openssl pkcs8"), e.getMessage());
    // A key of another algorithm than the certificate's.
    Path rsa = dir.resolve("rsa.pem");
    java.security.KeyPairGenerator g = java.security.KeyPairGenerator.getInstance("RSA");
    g.initialize(2048);
    Files.writeString(rsa, "-----BEGIN PRIVATE KEY-----\n"
        + java.util.Base64.getMimeEncoder().encodeToString(g.generateKeyPair().getPrivate().getEncoded())
        + "\n-----END PRIVATE KEY-----\n");
    e = assertThrows(IllegalArgumentException.class, () -> Tls.system().withClientCertificate(certs.clientCert(), rsa));
    assertTrue(e.getMessage().contains("not a EC key"), e.getMessage());
  }
}
