package io.github.mcpsealer.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;

/** Loopback ports for tests. */
public final class Ports {
  private Ports() {}

  /**
   * A port of 127.0.0.1 on which nothing listens: one the kernel just gave
   * and took back, so a connection to it is refused.
   *
   * @return the port
   */
  public static int closed() {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
