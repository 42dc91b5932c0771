package io.github.mcpsealer;

import com.google.protobuf.ByteString;
import io.github.mcpsealer.SealerException.Cause;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.function.Supplier;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The calls, the same over both transports: each attempt given what is left
 * of the call's deadline, a failure that may pass tried again after a
 * doubling backoff, the reply checked.
 */
final class RetryingClient implements SealerClient {
  /** The largest answer any sealer keeps as an outcome: 1 MiB (FORMAT.md, "Recorded outcomes"). */
  static final int MAX_OUTCOME = 1 << 20;
  /** The largest reply read from the sealer: the largest outcome, in base64, with its message. */
  static final int MAX_REPLY = 2 * MAX_OUTCOME;

  private final Transport transport;
  private final String target;
  private final long deadline;
  private final int attempts;
  private final long backoff;
  private final AtomicBoolean closed = new AtomicBoolean();

  RetryingClient(Transport transport, String target, Duration deadline, int attempts, Duration backoff) {
    this.transport = transport;
    this.target = target;
    this.deadline = deadline.toNanos();
    this.attempts = attempts;
    this.backoff = backoff.toNanos();
  }

  @Override
  public SealResponse seal(SealRequest request) {
    Objects.requireNonNull(request, "request");
    return retrying(left -> Replies.sealed(transport.seal(request, left), request.hasFlow()));
  }

  @Override
  public OpenResponse open(OpenRequest request) {
    Objects.requireNonNull(request, "request");
    return retrying(left -> Replies.opened(transport.open(request, left)));
  }

  @Override
  public RecordResponse record(RecordRequest request) {
    Objects.requireNonNull(request, "request");
    int size = request.getOutcome().size();
    if (size <= MAX_OUTCOME) {
      return retrying(left -> Replies.recorded(transport.record(request, left)));
    }
    // No sealer keeps it, and it may not even reach one: recorded as none,
    // so that retries of the state are refused at once.
    RecordRequest none = request.toBuilder().setOutcome(ByteString.EMPTY).build();
    retrying(left -> Replies.recorded(transport.record(none, left)));
    throw SealerException.invalidArgument(
        "an outcome of " + size + " bytes, over the " + MAX_OUTCOME + " any sealer keeps: recorded as none");
  }

  /**
   * Calls call(left) until it succeeds, fails for good, runs out of attempts
   * or of the deadline; each attempt is given what is left of the deadline.
   */
  private <T> T retrying(Function<Duration, T> call) {
    if (closed.get()) {
      throw new IllegalStateException("the sealer client is closed");
    }
    long end = System.nanoTime() + deadline;
    for (int i = 1; ; i++) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        throw deadlineExceeded();
      }
      try {
        return call.apply(Duration.ofNanos(left));
      } catch (SealerException e) {
        if (!e.retryable() || i >= attempts || Thread.currentThread().isInterrupted()) {
          throw e;
        }
      }
      long rest = end - System.nanoTime();
      if (rest <= 0) {
        throw deadlineExceeded();
      }
      try {
        TimeUnit.NANOSECONDS.sleep(Math.min(pause(i), rest));
      } catch (InterruptedException e) {
        throw SealerException.interrupted();
      }
    }
  }

  /** The pause after attempt i: the backoff doubled i - 1 times, saturating. */
  private long pause(int i) {
    int doublings = i - 1;
    if (backoff == 0 || doublings == 0) {
      return backoff;
    }
    return doublings >= Long.numberOfLeadingZeros(backoff) ? Long.MAX_VALUE : backoff << doublings;
  }

  private static SealerException deadlineExceeded() {
    return SealerException.failure(Cause.DEADLINE, 0, "sealer: deadline exceeded");
  }

  /** Whether a token can go in a header as it is: printable ASCII, no space. */
  static boolean headerSafe(String token) {
    return !token.isEmpty() && token.chars().allMatch(c -> c > 0x20 && c < 0x7f);
  }

  /**
   * The token to send now: null for none. One a header cannot carry is
   * refused before anything is sent, and never quoted.
   */
  static String tokenOf(Supplier<String> supplier) {
    if (supplier == null) {
      return null;
    }
    String token = supplier.get();
    if (token == null || token.isEmpty()) {
      return null;
    }
    if (!headerSafe(token)) {
      throw SealerException.invalidArgument("the bearer token must be printable ASCII without spaces");
    }
    return token;
  }

  @Override
  public String target() {
    return target;
  }

  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      transport.close();
    }
  }

  @Override
  public String toString() {
    return "SealerClient(" + target + ")";
  }
}
