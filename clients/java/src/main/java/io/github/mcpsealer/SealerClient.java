package io.github.mcpsealer;

import java.time.Duration;
import java.util.Objects;
import java.util.function.Supplier;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * A client of the sealer, over gRPC ({@link #grpc(String)}) or its REST
 * gateway ({@link #rest(String)}): the same calls, the same errors. Safe for
 * concurrent use; build one per sealer and share it.
 *
 * <p>Every call fails with a {@link SealerException} only, which is exactly
 * one of {@link SealerException#rejected() rejected} (the state is refused:
 * answer the MCP client with invalid params), {@link
 * SealerException#unavailable() unavailable} or {@link
 * SealerException#misconfigured() misconfigured}. A call is bounded by the
 * builder's {@link Builder#deadline(Duration) deadline}, every attempt and
 * backoff included; within it, a failure that may pass ({@link
 * SealerException#retryable()}) is tried again, up to {@link
 * Builder#attempts(int) attempts} times in all. A refused state, a refused
 * credential or an answer that is not the sealer's is never retried.
 *
 * <p>An answer that is not the sealer's (another service's 200, a reply
 * without the fields every answer of the sealer has) fails with {@link
 * SealerException.Cause#NOT_THE_SEALER}, never passes for one.
 */
public interface SealerClient extends AutoCloseable {

  /**
   * Seals a new requestState bound to the request's principal and binding.
   *
   * @param request what to seal; when it asks for a flow, an answer without one is refused
   * @return the state and when it expires
   * @throws SealerException when the sealer refused it or could not be asked
   */
  SealResponse seal(SealRequest request);

  /**
   * Opens a requestState presented by a retry, checked against the retry's
   * principal and binding.
   *
   * @param request the state exactly as the client sent it, and the retry
   * @return the payload sealed, or the outcome recorded for it
   * @throws SealerException {@link SealerException#rejected()} when the state is refused
   */
  OpenResponse open(OpenRequest request);

  /**
   * Records the outcome of a state that an open with {@code record_outcome}
   * consumed. An outcome over 1 MiB (1,048,576 bytes), which
   * no sealer keeps, is recorded as none, then refused with {@code
   * REASON_INVALID_ARGUMENT}.
   *
   * @param request the state as that open got it, and the answer sent for it
   * @return when the outcome goes away
   * @throws SealerException when it was not recorded
   */
  RecordResponse record(RecordRequest request);

  /**
   * The sealer's address, {@code scheme://host:port}, for log lines. Never a
   * credential.
   *
   * @return the address the client was built with
   */
  String target();

  /** Closes the connections; a call after this throws {@link IllegalStateException}. */
  @Override
  void close();

  /**
   * Starts a client of the sealer's gRPC API.
   *
   * @param target {@code http://host:port}, or {@code https://host:port} for TLS
   * @return a builder; {@link Builder#build()} checks the target
   */
  static Builder grpc(String target) {
    return new Builder(Builder.Kind.GRPC, target);
  }

  /**
   * Starts a client of the sealer's REST gateway ({@code POST /v1/seal},
   * {@code /v1/open}, {@code /v1/record}).
   *
   * @param baseUrl {@code http://host:port}, or {@code https://host:port} for TLS
   * @return a builder; {@link Builder#build()} checks the URL
   */
  static Builder rest(String baseUrl) {
    return new Builder(Builder.Kind.REST, baseUrl);
  }

  /**
   * Builds a {@link SealerClient}. Not safe for concurrent use; {@link
   * #toString()} never shows the token.
   */
  final class Builder {
    /** The default bound on one call, every attempt and backoff included: 5 s. */
    public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(5);
    /** The default number of attempts of a call whose failure may pass: 3. */
    public static final int DEFAULT_ATTEMPTS = 3;
    /** The default pause after the first failed attempt, doubled after each: 50 ms. */
    public static final Duration DEFAULT_BACKOFF = Duration.ofMillis(50);

    private enum Kind { GRPC, REST }

    private final Kind kind;
    private final String url;
    private Tls tls;
    private Supplier<String> token;
    private Duration deadline = DEFAULT_DEADLINE;
    private int attempts = DEFAULT_ATTEMPTS;
    private Duration backoff = DEFAULT_BACKOFF;

    private Builder(Kind kind, String url) {
      this.kind = kind;
      this.url = url;
    }

    /**
     * Reaches the sealer over TLS with these CAs and client certificate; it
     * needs an {@code https://} address. Without it, {@code https://} uses
     * {@link Tls#system()}.
     *
     * @param tls how to verify the sealer and, for mutual TLS, what to present
     * @return this builder
     */
    public Builder tls(Tls tls) {
      this.tls = Objects.requireNonNull(tls, "tls");
      return this;
    }

    /**
     * Sends this bearer token with every call ({@code authorization: Bearer}).
     * A token goes over plaintext {@code http://} only to loopback:
     * {@link #build()} refuses any other host.
     *
     * @param token the token, printable ASCII without spaces; null for none
     * @return this builder
     */
    public Builder token(String token) {
      if (token == null) {
        this.token = null;
        return this;
      }
      if (!RetryingClient.headerSafe(token)) {
        throw new IllegalArgumentException("the bearer token must be printable ASCII without spaces");
      }
      this.token = () -> token;
      return this;
    }

    /**
     * Asks for the bearer token before every attempt, for a token that
     * changes. A null or empty token sends none; what the supplier throws
     * propagates as it is. The same rule as {@link #token(String)} holds.
     *
     * @param token the source of the token
     * @return this builder
     */
    public Builder tokenSupplier(Supplier<String> token) {
      this.token = Objects.requireNonNull(token, "token");
      return this;
    }

    /**
     * Bounds each call, every attempt and backoff included: a sealer that
     * does not answer costs a call at most this long.
     *
     * @param deadline positive; 5 s by default
     * @return this builder
     */
    public Builder deadline(Duration deadline) {
      if (deadline == null || deadline.isNegative() || deadline.isZero()) {
        throw new IllegalArgumentException("deadline must be positive");
      }
      this.deadline = deadline;
      return this;
    }

    /**
     * How many times in all a call is tried while it fails with a {@link
     * SealerException#retryable()} error, within the deadline.
     *
     * @param attempts at least 1 (1: never retried); 3 by default
     * @return this builder
     */
    public Builder attempts(int attempts) {
      if (attempts < 1) {
        throw new IllegalArgumentException("attempts must be at least 1");
      }
      this.attempts = attempts;
      return this;
    }

    /**
     * The pause after the first failed attempt, doubled after each, and
     * never past the deadline.
     *
     * @param backoff zero or more; 50 ms by default
     * @return this builder
     */
    public Builder backoff(Duration backoff) {
      if (backoff == null || backoff.isNegative()) {
        throw new IllegalArgumentException("backoff must not be negative");
      }
      this.backoff = backoff;
      return this;
    }

    /**
     * Builds the client. Nothing is connected yet: the first call connects.
     *
     * @return the client
     * @throws IllegalArgumentException when the address is not {@code
     *     http(s)://host:port}, TLS is given with {@code http://}, or a token
     *     would go over plaintext to a host that is not loopback
     */
    public SealerClient build() {
      Endpoint endpoint = Endpoint.parse(url);
      if (!endpoint.tls() && tls != null) {
        throw new IllegalArgumentException("TLS options need an https:// URL");
      }
      if (!endpoint.tls() && token != null && !endpoint.loopback()) {
        throw new IllegalArgumentException("refusing to send a bearer token over plaintext http:// to "
            + endpoint.host() + ", which is not loopback: use https:// (with tls(...)) for a sealer on another host");
      }
      Tls t = endpoint.tls() ? (tls != null ? tls : Tls.system()) : null;
      Transport wire = kind == Kind.GRPC
          ? GrpcTransport.connect(endpoint, t, token)
          : new RestTransport(endpoint, t, token);
      return new RetryingClient(wire, endpoint.url(), deadline, attempts, backoff);
    }

    @Override
    public String toString() {
      String where;
      try {
        where = Endpoint.parse(url).url();
      } catch (IllegalArgumentException e) {
        where = "an invalid URL"; // as given, it might hold a credential
      }
      return "SealerClient.Builder(" + kind.name().toLowerCase(java.util.Locale.ROOT) + " " + where
          + (tls != null ? ", " + tls : "") + (token != null ? ", a token" : "")
          + ", deadline " + deadline + ", " + attempts + " attempts, backoff " + backoff + ")";
    }
  }
}
