package io.github.mcpsealer;

import java.time.Duration;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * One attempt of each call over one wire, gRPC or REST, bounded by the time
 * given: a failure is a {@link SealerException}, classified by the wire.
 * {@link RetryingClient} retries and checks the replies.
 */
interface Transport extends AutoCloseable {
  SealResponse seal(SealRequest request, Duration timeout);

  OpenResponse open(OpenRequest request, Duration timeout);

  RecordResponse record(RecordRequest request, Duration timeout);

  @Override
  void close();
}
