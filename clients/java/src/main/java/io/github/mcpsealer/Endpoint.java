package io.github.mcpsealer;

import java.net.InetAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The address of a sealer, {@code http://host:port} or {@code https://host:port}
 * and nothing more: the API's paths are fixed, so a path, a query, a fragment
 * or user information is refused, and so is a URL without its port.
 */
record Endpoint(String scheme, String host, int port) {
  // An IPv4 address as Python's ipaddress takes it: four decimal parts,
  // never the short or octal forms that InetAddress also reads.
  private static final Pattern IPV4 =
      Pattern.compile("(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}");

  /** Parses a sealer's URL; IllegalArgumentException for anything but scheme://host:port. */
  static Endpoint parse(String url) {
    URI u;
    try {
      u = new URI(url);
    } catch (URISyntaxException | NullPointerException e) {
      throw badUrl();
    }
    String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
    String path = u.getRawPath();
    if (!(scheme.equals("http") || scheme.equals("https"))
        || u.getHost() == null
        || u.getPort() < 0
        || u.getRawUserInfo() != null
        || !(path == null || path.isEmpty() || path.equals("/"))
        || u.getRawQuery() != null
        || u.getRawFragment() != null) {
      throw badUrl();
    }
    return new Endpoint(scheme, u.getHost(), u.getPort());
  }

  private static IllegalArgumentException badUrl() {
    return new IllegalArgumentException("the sealer's URL must be http://host:port or https://host:port, with no path");
  }

  boolean tls() {
    return scheme.equals("https");
  }

  /** The host as a socket takes it: an IPv6 literal without its brackets. */
  String bareHost() {
    return host.startsWith("[") ? host.substring(1, host.length() - 1) : host;
  }

  /** scheme://host:port, for log lines. */
  String url() {
    return scheme + "://" + host + ":" + port;
  }

  /**
   * Whether the host is this machine by its spelling alone: 127.0.0.0/8, ::1
   * (also IPv4-mapped) or the name localhost. Other names are not resolved: a
   * name may point elsewhere tomorrow.
   */
  boolean loopback() {
    String h = bareHost();
    if (h.equalsIgnoreCase("localhost")) {
      return true;
    }
    if (!IPV4.matcher(h).matches() && !h.contains(":")) {
      return false; // a name: never resolved
    }
    try {
      // A literal address: InetAddress parses it without any lookup.
      return InetAddress.getByName(h).isLoopbackAddress();
    } catch (UnknownHostException e) {
      return false;
    }
  }

  @Override
  public String toString() {
    return url();
  }
}
