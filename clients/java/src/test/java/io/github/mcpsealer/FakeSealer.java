package io.github.mcpsealer;

import com.google.protobuf.Any;
import com.google.protobuf.Message;
import com.google.rpc.ErrorInfo;
import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import sealer.v1.SealerGrpc;
import sealer.v1.SealerOuterClass;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.OpenResponse;
import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.RecordRequest;
import sealer.v1.SealerOuterClass.RecordResponse;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * A Sealer service in memory for the unit tests of error paths: it answers
 * the n-th call (from 1) with what {@link #answer} gives: a reply, a
 * StatusRuntimeException, or null to never answer. It keeps what each call
 * got: the request, the authorization header, the deadline.
 */
final class FakeSealer extends SealerGrpc.SealerImplBase implements AutoCloseable {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Context.Key<String> SEEN_TOKEN = Context.key("authorization");

  /** One call as the fake saw it; left: the time left of its deadline when it came, or null. */
  record Call(Message request, String authorization, Duration left) {}

  volatile IntFunction<Object> answer = n -> null;
  final List<Call> calls = new CopyOnWriteArrayList<>();
  private final List<SealerClient> clients = new CopyOnWriteArrayList<>();
  private final String name = InProcessServerBuilder.generateName();
  private final Server server;

  FakeSealer() throws IOException {
    ServerInterceptor headers = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata md, ServerCallHandler<Q, R> next) {
        Context ctx = Context.current().withValue(SEEN_TOKEN, md.get(AUTHORIZATION));
        return io.grpc.Contexts.interceptCall(ctx, call, md, next);
      }
    };
    server = InProcessServerBuilder.forName(name).directExecutor()
        .addService(ServerInterceptors.intercept(this, headers)).build().start();
  }

  /** A client of this fake, as the builder makes one but over the in-process channel. */
  SealerClient client(Duration deadline, int attempts, Duration backoff, Supplier<String> token) {
    ManagedChannel channel = GrpcTransport.build(InProcessChannelBuilder.forName(name).directExecutor());
    SealerClient c = new RetryingClient(new GrpcTransport(channel, token), "in-process:" + name, deadline, attempts, backoff);
    clients.add(c);
    return c;
  }

  SealerClient client(int attempts) {
    return client(Duration.ofSeconds(5), attempts, Duration.ZERO, null);
  }

  /** An error as the sealer makes it: its reason's gRPC code, an ErrorInfo of domain sealer.mcp. */
  static StatusRuntimeException error(Reason reason) {
    return error(reason.name().substring("REASON_".length()), GrpcTransport.DOMAIN, rule(reason).getGrpcCode());
  }

  /** A status of this code with an ErrorInfo of this reason text and domain. */
  static StatusRuntimeException error(String reason, String domain, int code) {
    return StatusProto.toStatusRuntimeException(com.google.rpc.Status.newBuilder()
        .setCode(code)
        .setMessage("sealer: " + reason.toLowerCase(java.util.Locale.ROOT).replace('_', ' '))
        .addDetails(Any.pack(ErrorInfo.newBuilder().setReason(reason).setDomain(domain).build()))
        .build());
  }

  static SealerOuterClass.ReasonRule rule(Reason reason) {
    return reason.getValueDescriptor().getOptions().getExtension(SealerOuterClass.rule);
  }

  @Override
  public void seal(SealRequest request, StreamObserver<SealResponse> out) {
    respond(request, out);
  }

  @Override
  public void open(OpenRequest request, StreamObserver<OpenResponse> out) {
    respond(request, out);
  }

  @Override
  public void record(RecordRequest request, StreamObserver<RecordResponse> out) {
    respond(request, out);
  }

  @SuppressWarnings("unchecked")
  private <R> void respond(Message request, StreamObserver<R> out) {
    Deadline deadline = Context.current().getDeadline();
    Duration left = deadline == null ? null : Duration.ofNanos(deadline.timeRemaining(TimeUnit.NANOSECONDS));
    calls.add(new Call(request, SEEN_TOKEN.get(), left));
    Object a = answer.apply(calls.size());
    if (a == null) {
      return; // never answers
    }
    if (a instanceof Throwable t) {
      out.onError(t);
      return;
    }
    out.onNext((R) a);
    out.onCompleted();
  }

  @Override
  public void close() {
    clients.forEach(SealerClient::close);
    server.shutdownNow();
  }
}
