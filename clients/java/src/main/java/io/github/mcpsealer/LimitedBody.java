package io.github.mcpsealer;

import java.io.ByteArrayOutputStream;
import java.net.http.HttpResponse.BodyHandler;
import java.net.http.HttpResponse.BodySubscriber;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;

/**
 * A reply's body read into memory up to a limit: one announced larger, or
 * that grows past it, fails with {@link TooLarge} before any parsing, and
 * the rest of it is never read.
 */
final class LimitedBody implements BodySubscriber<byte[]> {
  /** A body over the limit, of a reply of this status. */
  static final class TooLarge extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;

    TooLarge(int status) {
      super("the reply is too large", null, false, false);
      this.status = status;
    }

    int status() {
      return status;
    }
  }

  private final int limit;
  private final int status;
  private final boolean announcedTooLarge;
  private final ByteArrayOutputStream data = new ByteArrayOutputStream();
  private final CompletableFuture<byte[]> body = new CompletableFuture<>();
  private Flow.Subscription subscription;

  private LimitedBody(int limit, int status, boolean announcedTooLarge) {
    this.limit = limit;
    this.status = status;
    this.announcedTooLarge = announcedTooLarge;
  }

  /** Reads bodies of at most limit bytes. */
  static BodyHandler<byte[]> handler(int limit) {
    return info -> new LimitedBody(limit, info.statusCode(),
        info.headers().firstValueAsLong("content-length").orElse(0) > limit);
  }

  @Override
  public void onSubscribe(Flow.Subscription s) {
    subscription = s;
    if (announcedTooLarge) {
      s.cancel();
      body.completeExceptionally(new TooLarge(status));
      return;
    }
    s.request(Long.MAX_VALUE);
  }

  @Override
  public void onNext(List<ByteBuffer> buffers) {
    if (body.isDone()) {
      return;
    }
    for (ByteBuffer b : buffers) {
      if (data.size() + b.remaining() > limit) {
        subscription.cancel();
        body.completeExceptionally(new TooLarge(status));
        return;
      }
      byte[] chunk = new byte[b.remaining()];
      b.get(chunk);
      data.write(chunk, 0, chunk.length);
    }
  }

  @Override
  public void onError(Throwable t) {
    body.completeExceptionally(t);
  }

  @Override
  public void onComplete() {
    body.complete(data.toByteArray());
  }

  @Override
  public CompletionStage<byte[]> getBody() {
    return body;
  }
}
