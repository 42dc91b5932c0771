package io.github.mcpsealer.testing;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.SecureRandom;
import java.security.spec.ECGenParameterSpec;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.List;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.openssl.jcajce.JcaPEMWriter;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.bouncycastle.util.io.pem.PemObject;

/**
 * A test PKI in a directory, made with BouncyCastle: a CA, a server
 * certificate for 127.0.0.1 and {@value #SERVER_NAME} (not localhost), and a
 * client certificate whose URI SAN is {@value #CLIENT_URI}. Keys are
 * unencrypted PKCS #8 files only their owner may read, as the sealer wants
 * an operator's. Valid from a minute ago for an hour.
 *
 * @param ca the CA's certificate (PEM)
 * @param serverCert the server's certificate (PEM)
 * @param serverKey the server's key (PEM, PKCS #8)
 * @param clientCert the client's certificate (PEM)
 * @param clientKey the client's key (PEM, PKCS #8)
 */
public record TestCerts(Path ca, Path serverCert, Path serverKey, Path clientCert, Path clientKey) {
  /** The DNS name of the server certificate, besides 127.0.0.1. */
  public static final String SERVER_NAME = "sealer.test";
  /** The URI SAN of the client certificate, which a tenant's mtls.uris names. */
  public static final String CLIENT_URI = "spiffe://test/mcp/weather";

  /**
   * Makes a new PKI in dir (ca.pem, server.pem, server-key.pem, client.pem, client-key.pem).
   *
   * @param dir an existing directory
   * @return the paths of the files
   */
  public static TestCerts create(Path dir) {
    try {
      KeyPair caKey = ecKey();
      X500Name caName = new X500Name("CN=test ca " + Long.toHexString(new SecureRandom().nextLong()));
      X509CertificateHolder ca = sign(caName, caName, caKey.getPublic(), caKey, true, null);
      KeyPair serverKey = ecKey();
      X509CertificateHolder server = sign(new X500Name("CN=server"), caName, serverKey.getPublic(), caKey, false,
          new GeneralNames(new GeneralName[] {
              new GeneralName(GeneralName.iPAddress, "127.0.0.1"),
              new GeneralName(GeneralName.dNSName, SERVER_NAME)}));
      KeyPair clientKey = ecKey();
      X509CertificateHolder client = sign(new X500Name("CN=client"), caName, clientKey.getPublic(), caKey, false,
          new GeneralNames(new GeneralName(GeneralName.uniformResourceIdentifier, CLIENT_URI)));
      TestCerts certs = new TestCerts(dir.resolve("ca.pem"), dir.resolve("server.pem"), dir.resolve("server-key.pem"),
          dir.resolve("client.pem"), dir.resolve("client-key.pem"));
      write(certs.ca, pem("CERTIFICATE", ca.getEncoded()));
      write(certs.serverCert, pem("CERTIFICATE", server.getEncoded()));
      write(certs.serverKey, pem("PRIVATE KEY", serverKey.getPrivate().getEncoded()));
      write(certs.clientCert, pem("CERTIFICATE", client.getEncoded()));
      write(certs.clientKey, pem("PRIVATE KEY", clientKey.getPrivate().getEncoded()));
      return certs;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (GeneralSecurityException | OperatorCreationException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The flags that give the sealer this PKI: its certificate, and the CA
   * that verifies client certificates (mutual TLS).
   *
   * @return {@code --tls-cert, --tls-key, --tls-client-ca} with their paths
   */
  public List<String> sealerFlags() {
    return List.of("--tls-cert", serverCert.toString(), "--tls-key", serverKey.toString(),
        "--tls-client-ca", ca.toString());
  }

  private static KeyPair ecKey() throws GeneralSecurityException {
    KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
    g.initialize(new ECGenParameterSpec("secp256r1"));
    return g.generateKeyPair();
  }

  private static X509CertificateHolder sign(X500Name subject, X500Name issuer, java.security.PublicKey key,
      KeyPair issuerKey, boolean isCa, GeneralNames sans) throws IOException, OperatorCreationException {
    Instant now = Instant.now();
    JcaX509v3CertificateBuilder b = new JcaX509v3CertificateBuilder(issuer, new BigInteger(64, new SecureRandom()),
        Date.from(now.minus(Duration.ofMinutes(1))), Date.from(now.plus(Duration.ofHours(1))), subject, key);
    b.addExtension(Extension.basicConstraints, true, new BasicConstraints(isCa));
    if (sans != null) {
      b.addExtension(Extension.subjectAlternativeName, false, sans);
    }
    return b.build(new JcaContentSignerBuilder("SHA256withECDSA").build(issuerKey.getPrivate()));
  }

  private static String pem(String type, byte[] der) throws IOException {
    StringWriter out = new StringWriter();
    try (JcaPEMWriter w = new JcaPEMWriter(out)) {
      w.writeObject(new PemObject(type, der));
    }
    return out.toString();
  }

  private static void write(Path file, String pem) throws IOException {
    Files.deleteIfExists(file);
    Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    Files.writeString(file, pem, StandardCharsets.US_ASCII);
  }
}
