package io.github.mcpsealer;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * How a client reaches a sealer over TLS: the CAs that verify the sealer's
 * certificate, and optionally a client certificate for mutual TLS. The same
 * over gRPC and REST.
 *
 * <p>Files are read when the {@code Tls} is made, so a missing or malformed
 * file fails there ({@link IllegalArgumentException}), not at the first
 * call. A {@code Tls} is immutable; {@link #toString()} never shows the key.
 *
 * <pre>{@code
 * Tls tls = Tls.trusting(Path.of("ca.pem"))
 *     .withClientCertificate(Path.of("client.pem"), Path.of("client-key.pem"));
 * }</pre>
 */
public final class Tls {
  private static final Pattern PRIVATE_KEY =
      Pattern.compile("-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END PRIVATE KEY-----");

  private final List<X509Certificate> roots; // null: the system's
  private final List<X509Certificate> chain; // null: no client certificate
  private final PrivateKey key;

  private Tls(List<X509Certificate> roots, List<X509Certificate> chain, PrivateKey key) {
    this.roots = roots;
    this.chain = chain;
    this.key = key;
  }

  /**
   * TLS that verifies the sealer with the system's trusted CAs, without a
   * client certificate: what an {@code https://} address gets by default.
   *
   * @return the system's TLS
   */
  public static Tls system() {
    return new Tls(null, null, null);
  }

  /**
   * TLS that verifies the sealer with the CA certificates of a PEM file, and
   * with nothing else: the system's CAs are not trusted then.
   *
   * @param caPem a PEM file of one or more CA certificates
   * @return TLS trusting only those CAs
   * @throws IllegalArgumentException when the file cannot be read or holds no certificate
   */
  public static Tls trusting(Path caPem) {
    return new Tls(certificates("CA", caPem), null, null);
  }

  /**
   * This TLS with a client certificate, for mutual TLS: the sealer then
   * knows the caller by its certificate.
   *
   * @param certPem a PEM file of the client certificate, then any intermediate CAs
   * @param keyPem a PEM file of its private key, unencrypted PKCS #8
   *     ({@code BEGIN PRIVATE KEY}; convert another form with
   *     {@code openssl pkcs8 -topk8 -nocrypt})
   * @return a new {@code Tls}; this one is unchanged
   * @throws IllegalArgumentException when a file cannot be read, or holds no certificate or no such key
   */
  public Tls withClientCertificate(Path certPem, Path keyPem) {
    List<X509Certificate> certs = certificates("client certificate", certPem);
    return new Tls(roots, certs, privateKey(keyPem, certs.get(0)));
  }

  /**
   * Whether the system's CAs verify the sealer.
   *
   * @return true when no CA file was given
   */
  public boolean trustsSystem() {
    return roots == null;
  }

  /**
   * Whether a client certificate is presented.
   *
   * @return true for mutual TLS
   */
  public boolean mutual() {
    return chain != null;
  }

  /** The trust managers of the CAs given, or null for the system's. */
  TrustManager[] trustManagers() {
    if (roots == null) {
      return null;
    }
    try {
      KeyStore store = emptyStore();
      for (int i = 0; i < roots.size(); i++) {
        store.setCertificateEntry("ca-" + i, roots.get(i));
      }
      TrustManagerFactory f = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      f.init(store);
      return f.getTrustManagers();
    } catch (GeneralSecurityException | IOException e) {
      throw new IllegalStateException("TLS: cannot load the CA certificates: " + e.getMessage(), e);
    }
  }

  /** The key managers of the client certificate, or null when there is none. */
  KeyManager[] keyManagers() {
    if (chain == null) {
      return null;
    }
    try {
      char[] none = new char[0];
      KeyStore store = emptyStore();
      store.setKeyEntry("client", key, none, chain.toArray(new Certificate[0]));
      KeyManagerFactory f = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      f.init(store, none);
      return f.getKeyManagers();
    } catch (GeneralSecurityException | IOException e) {
      throw new IllegalStateException("TLS: cannot load the client certificate: " + e.getMessage(), e);
    }
  }

  /** An SSLContext of these CAs and this client certificate (the JDK's defaults for what is not given). */
  SSLContext sslContext() {
    try {
      if (roots == null && chain == null) {
        return SSLContext.getDefault();
      }
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(keyManagers(), trustManagers(), null);
      return ctx;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("TLS: " + e.getMessage(), e);
    }
  }

  private static KeyStore emptyStore() throws GeneralSecurityException, IOException {
    KeyStore store = KeyStore.getInstance("PKCS12");
    store.load(null, null);
    return store;
  }

  private static byte[] read(String what, Path file) {
    Objects.requireNonNull(file, what);
    try {
      return Files.readAllBytes(file);
    } catch (IOException e) {
      throw new IllegalArgumentException("TLS " + what + ": cannot read " + file + ": " + e, e);
    }
  }

  private static List<X509Certificate> certificates(String what, Path file) {
    byte[] pem = read(what, file);
    try {
      List<X509Certificate> certs = CertificateFactory.getInstance("X.509")
          .generateCertificates(new ByteArrayInputStream(pem)).stream()
          .map(c -> (X509Certificate) c)
          .toList();
      if (certs.isEmpty()) {
        throw new IllegalArgumentException("TLS " + what + ": no certificate in " + file);
      }
      return certs;
    } catch (CertificateException e) {
      throw new IllegalArgumentException("TLS " + what + ": no PEM certificate in " + file, e);
    }
  }

  private static PrivateKey privateKey(Path file, X509Certificate cert) {
    String pem = new String(read("key", file), StandardCharsets.US_ASCII);
    Matcher m = PRIVATE_KEY.matcher(pem);
    if (!m.find()) {
      throw new IllegalArgumentException(
          "TLS key: no unencrypted PKCS #8 key (BEGIN PRIVATE KEY) in " + file
              + "; convert it with openssl pkcs8 -topk8 -nocrypt");
    }
    byte[] der = Base64.getMimeDecoder().decode(m.group(1));
    String algorithm = cert.getPublicKey().getAlgorithm(); // RSA, EC, Ed25519...
    try {
      return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
    } catch (InvalidKeySpecException | java.security.NoSuchAlgorithmException e) {
      // The exception of a key factory may quote the key: never kept.
      throw new IllegalArgumentException("TLS key: " + file + " is not a " + algorithm + " key for the certificate");
    }
  }

  @Override
  public String toString() {
    return "Tls(" + (roots == null ? "system CAs" : roots.size() + " CA certificate(s)")
        + (chain == null ? "" : ", client " + chain.get(0).getSubjectX500Principal().getName()) + ")";
  }
}
