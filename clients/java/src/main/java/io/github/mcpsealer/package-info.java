/**
 * The sealer's Java client: it seals and opens the {@code requestState} of
 * MCP multi round-trip requests, over gRPC or the REST gateway alike.
 *
 * <p>Build one {@link io.github.mcpsealer.SealerClient} per sealer and share
 * it; the messages are the proto's ({@code sealer.v1.SealerOuterClass}):
 *
 * <pre>{@code
 * try (SealerClient sealer = SealerClient.grpc("https://sealer.internal:7443")
 *     .tls(Tls.trusting(Path.of("ca.pem")).withClientCertificate(Path.of("mcp.pem"), Path.of("mcp-key.pem")))
 *     .deadline(Duration.ofSeconds(2))
 *     .build()) {
 *   Binding weather = Binding.newBuilder().setDigest(digest).build(); // 32 bytes: the request digest
 *   SealResponse sealed = sealer.seal(SealRequest.newBuilder()
 *       .setPrincipal("alice").setRequest(weather)
 *       .setPayload(ByteString.copyFromUtf8("{\"step\":1}"))
 *       .setTtl(Durations.fromSeconds(300))
 *       .build());
 *   // ...the MCP client retries with sealed.getRequestState()...
 *   try {
 *     OpenResponse opened = sealer.open(OpenRequest.newBuilder()
 *         .setRequestState(sealed.getRequestState()).setPrincipal("alice").setRequest(weather)
 *         .build());
 *     continueWith(opened.getPayload());
 *   } catch (SealerException e) {
 *     if (e.rejected()) {
 *       // the state is refused: answer invalid params (-32602), the client starts over
 *     } else {
 *       log.warn("sealer at {}: {} ({})", sealer.target(), e.why(), e.unavailable() ? "unavailable" : "misconfigured");
 *     }
 *   }
 * }
 * }</pre>
 *
 * <h2>Errors</h2>
 *
 * <p>Every failure is a {@link io.github.mcpsealer.SealerException}: the
 * sealer's reason, read from the {@code google.rpc.ErrorInfo} (domain
 * {@code sealer.mcp}) of a gRPC status or of the gateway's error body, or,
 * without one, the cause of a failure on the way (unreachable, a deadline,
 * TLS, an answer that is not the sealer's, an HTTP status without the
 * sealer's body). Each is exactly one of rejected, unavailable and
 * misconfigured. Messages never hold the state, the payload, the principal
 * or the token.
 *
 * <h2>Credentials</h2>
 *
 * <p>{@link io.github.mcpsealer.Tls} gives the CAs and, for mutual TLS, the
 * client certificate; a bearer token ({@link
 * io.github.mcpsealer.SealerClient.Builder#token(String)}) goes over
 * plaintext only to loopback, and never into a message or a
 * {@code toString()}.
 */
package io.github.mcpsealer;
