package io.github.mcpsealer;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.AbstractMap.SimpleImmutableEntry;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The RFC 8785 (JCS) form of a JSON value held decoded: a Jackson tree, or
 * the {@code Map}, {@code List}, {@code String}, {@code Number},
 * {@code Boolean} and {@code null} a JSON parser builds (the two may mix).
 *
 * <p>It writes the canonical form of what the value's JSON text would be
 * once parsed: member names sorted by their UTF-16 code units (the order of
 * {@link String#compareTo}), strings with only {@code "}, {@code \} and
 * U+0000 to U+001F escaped, every number as the double a parser reads from
 * its text, written as ECMAScript's {@code Number.prototype.toString}
 * writes it ({@link #number}). It refuses what JSON text cannot hold: lone
 * surrogates, numbers that are not finite or do not fit a double, member
 * names that are not strings, and any other Java object.
 *
 * <p>A writer is for one value: {@link #arguments} holds it to the limits
 * of FORMAT.md, "Request digest", step 4; {@link #answers} to none. It walks
 * the value with a stack of its own, so that no nesting overflows the
 * thread's, and refuses a container that holds itself.
 */
final class Jcs {
  /** 2^53 - 1: beyond it doubles, and so JCS, cannot tell integers apart. */
  static final long MAX_SAFE_INTEGER = (1L << 53) - 1;

  private final String what; // the value's name in errors: params.arguments, inputResponses
  private final int maxDepth;
  private final int maxValues;
  private final boolean safeNumbers;
  private final StringBuilder out = new StringBuilder(256);
  private int values;

  private Jcs(String what, int maxDepth, int maxValues, boolean safeNumbers) {
    this.what = what;
    this.maxDepth = maxDepth;
    this.maxValues = maxValues;
    this.safeNumbers = safeNumbers;
  }

  /**
   * A writer of the arguments of a request, named what: at most maxDepth
   * levels (the arguments object is level 1) and maxValues values, numbers
   * within ±(2^53 - 1).
   */
  static Jcs arguments(String what, int maxDepth, int maxValues) {
    return new Jcs(what, maxDepth, maxValues, true);
  }

  /** A writer of answers, named what: any nesting, numbers of any size that fit a double. */
  static Jcs answers(String what) {
    return new Jcs(what, Integer.MAX_VALUE, Integer.MAX_VALUE, false);
  }

  /** The canonical form written, in UTF-8 (no lone surrogate was written). */
  byte[] bytes() {
    return out.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** Whether v is a JSON object: a Map or an ObjectNode. */
  static boolean isObject(Object v) {
    return v instanceof Map<?, ?> || (v instanceof JsonNode n && n.isObject());
  }

  /** Whether v is JSON null: Java's null or a NullNode. */
  static boolean isNull(Object v) {
    return v == null || (v instanceof JsonNode n && n.isNull());
  }

  /**
   * An object or array being written: what is left of its members or
   * elements, its level, and the member name left out of the objects it
   * holds (null: none).
   */
  private record Open(Object container, Iterator<?> rest, boolean object, int level, String dropInChildren) {}

  private final ArrayDeque<Open> open = new ArrayDeque<>();
  // The containers open on the way down, by identity: one met again holds itself.
  private final Set<Object> path = Collections.newSetFromMap(new IdentityHashMap<>());

  /**
   * Writes the canonical form of root, the value at level 1, leaving out of
   * each object that root holds directly the member named dropInChildren
   * (null: none): the {@code _meta} of each response in inputResponses.
   */
  void write(Object root, String dropInChildren) {
    value(root, 1, null, dropInChildren);
    while (!open.isEmpty()) {
      Open o = open.peek();
      if (!o.rest().hasNext()) {
        out.append(o.object() ? '}' : ']');
        path.remove(o.container());
        open.pop();
        continue;
      }
      Object item = o.rest().next();
      char last = out.charAt(out.length() - 1);
      if (last != '{' && last != '[') { // what precedes the first item; no value ends so
        out.append(',');
      }
      if (o.object()) {
        Map.Entry<?, ?> m = (Map.Entry<?, ?>) item;
        string((String) m.getKey());
        out.append(':');
        item = m.getValue();
      }
      value(item, o.level() + 1, o.dropInChildren(), null);
    }
  }

  /**
   * Writes v, found at level, or opens it: an object without its member
   * named drop, whose own objects leave out dropInChildren.
   */
  private void value(Object v, int level, String drop, String dropInChildren) {
    if (++values > maxValues) {
      throw tooMany();
    }
    if (v instanceof JsonNode node) {
      switch (node.getNodeType()) {
        case NULL -> out.append("null");
        case BOOLEAN -> out.append(node.booleanValue() ? "true" : "false");
        case STRING -> string(node.textValue());
        case NUMBER -> number(node.numberValue());
        case OBJECT -> open(node, members(node, drop), node.size(), true, level, dropInChildren);
        case ARRAY -> open(node, node.elements(), node.size(), false, level, dropInChildren);
        // MISSING, BINARY, POJO: what no JSON text holds
        default -> throw refuse("holds a value that is not JSON (" + node.getNodeType() + ")");
      }
    } else if (v == null) {
      out.append("null");
    } else if (v instanceof Boolean b) {
      out.append(b ? "true" : "false");
    } else if (v instanceof String str) {
      string(str);
    } else if (v instanceof Number n) {
      number(n);
    } else if (v instanceof Map<?, ?> map) {
      open(map, members(map, drop), map.size(), true, level, dropInChildren);
    } else if (v instanceof List<?> list) {
      open(list, list.iterator(), list.size(), false, level, dropInChildren);
    } else {
      throw refuse("holds a value that is not JSON (" + v.getClass().getSimpleName() + ")");
    }
  }

  /**
   * Opens a container of n members or elements at level, refusing it before
   * it is read when it is beyond the limits or holds itself.
   */
  private void open(Object container, Iterator<?> rest, int n, boolean object, int level, String dropInChildren) {
    if (level > maxDepth) {
      throw refuse("nested deeper than " + maxDepth + " levels");
    }
    if ((long) values + n > maxValues) {
      throw tooMany();
    }
    if (!path.add(container)) {
      throw refuse("holds itself");
    }
    out.append(object ? '{' : '[');
    open.push(new Open(container, rest, object, level, dropInChildren));
  }

  /**
   * The members of obj, a Map or an ObjectNode, but the one named drop,
   * sorted by name as RFC 8785 sorts them: String.compareTo compares UTF-16
   * code units.
   */
  private Iterator<Map.Entry<String, Object>> members(Object obj, String drop) {
    List<Map.Entry<String, Object>> members = new ArrayList<>();
    if (obj instanceof JsonNode node) {
      for (Map.Entry<String, JsonNode> m : node.properties()) {
        members.add(new SimpleImmutableEntry<>(m.getKey(), m.getValue()));
      }
    } else {
      for (Map.Entry<?, ?> m : ((Map<?, ?>) obj).entrySet()) {
        if (!(m.getKey() instanceof String name)) {
          throw refuse("holds a member name that is not a string");
        }
        members.add(new SimpleImmutableEntry<>(name, m.getValue())); // Map.entry takes no null value
      }
    }
    if (drop != null) {
      members.removeIf(m -> m.getKey().equals(drop));
    }
    members.sort(Map.Entry.comparingByKey());
    return members.iterator();
  }

  /** Appends s as a JCS string, refusing a lone surrogate, which UTF-8 cannot hold. */
  private void string(String s) {
    if (!wellFormed(s)) {
      throw refuse("holds a lone surrogate");
    }
    quote(out, s);
  }

  /** Appends s quoted as JCS writes it: the two-character escapes, {@code \}{@code u00xx} for other controls. */
  static void quote(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xf]);
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** Whether s is valid Unicode: every surrogate in a pair, so that UTF-8 (and JCS) can hold it. */
  static boolean wellFormed(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  private void number(Number n) {
    double d = toDouble(n);
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      throw refuse("holds a number that is not finite or does not fit a double");
    }
    if (safeNumbers && Math.abs(d) > MAX_SAFE_INTEGER) {
      throw refuse("holds a number beyond ±(2^53-1); send it as a string");
    }
    out.append(number(d));
  }

  /**
   * The double a JSON parser reads from the text of n (round to nearest,
   * ties to even): infinite when it does not fit one. The rule is on this
   * double, not on n: 9007199254740993 reads as 2^53.
   */
  private double toDouble(Number n) {
    if (n instanceof Integer || n instanceof Long || n instanceof Short || n instanceof Byte) {
      return (double) n.longValue(); // JLS 5.1.2: rounded to nearest
    }
    if (n instanceof Double || n instanceof Float) {
      return n.doubleValue();
    }
    if (n instanceof BigInteger || n instanceof BigDecimal) {
      // Double.parseDouble rounds correctly, as strconv.ParseFloat does.
      return Double.parseDouble(n.toString());
    }
    throw refuse("holds a number that is not JSON (" + n.getClass().getSimpleName() + ")");
  }

  /**
   * d, finite, as ECMAScript's Number.prototype.toString writes it (RFC 8785,
   * section 3.2.2.3): the fewest significant digits that read back as d, the
   * closest to d of those; in plain notation from 1e-6 up to 1e21, else as
   * {@code 1.5e-7} or {@code 1e+21}; 0 for -0.
   *
   * <p>Java 17's Double.toString does not always give the fewest digits
   * (JDK-4511638, fixed in 19), so the digits come from BigDecimal: the
   * exact value rounded to p digits, for the least p that reads back.
   */
  static String number(double d) {
    if (d == 0) {
      return "0";
    }
    String sign = d < 0 ? "-" : "";
    double a = Math.abs(d);
    if (a <= MAX_SAFE_INTEGER && a == Math.rint(a)) {
      return sign + (long) a;
    }
    BigDecimal s = shortest(a).stripTrailingZeros();
    String digits = s.unscaledValue().toString();
    int k = digits.length();
    int n = k - s.scale(); // a = 0.digits × 10^n
    StringBuilder b = new StringBuilder(sign);
    if (k <= n && n <= 21) {
      b.append(digits).append("0".repeat(n - k));
    } else if (0 < n && n <= 21) {
      b.append(digits, 0, n).append('.').append(digits, n, k);
    } else if (-6 < n && n <= 0) {
      b.append("0.").append("0".repeat(-n)).append(digits);
    } else {
      b.append(digits.charAt(0));
      if (k > 1) {
        b.append('.').append(digits, 1, k);
      }
      int e = n - 1;
      b.append('e').append(e < 0 ? '-' : '+').append(Math.abs(e));
    }
    return b.toString();
  }

  /**
   * The decimal of fewest significant digits that reads back as a (positive,
   * finite), and of those the closest to a. That some p-digit decimal reads
   * back holds for every p from the least one on (the p-digit decimals are
   * among the (p+1)-digit ones), so the search goes down from the digits
   * Double.toString gives, which read back and are seldom one too many, to
   * the first p for which none does.
   */
  private static BigDecimal shortest(double a) {
    BigDecimal exact = new BigDecimal(a);
    int hi = Math.min(17, significantDigits(Double.toString(a)));
    BigDecimal found = closest(exact, a, hi);
    if (found == null) {
      hi = 17; // 17 digits always read back
      found = closest(exact, a, hi);
    }
    for (int p = hi - 1; p >= 1; p--) {
      BigDecimal c = closest(exact, a, p);
      if (c == null) {
        break;
      }
      found = c;
    }
    return found;
  }

  /** The significant digits of t, a Double.toString of a positive double. */
  private static int significantDigits(String t) {
    int e = t.indexOf('E');
    String digits = (e < 0 ? t : t.substring(0, e)).replace(".", "");
    int first = 0;
    int last = digits.length();
    while (first < last - 1 && digits.charAt(first) == '0') {
      first++;
    }
    while (last > first + 1 && digits.charAt(last - 1) == '0') {
      last--;
    }
    return last - first;
  }

  /**
   * The p-digit decimal closest to exact, the value of a, that reads back as
   * a, or null. The closest of all (ties to even, as Go's strconv and V8
   * break them) reads back when any does, unless a is a power of two: the
   * decimals that read back lie only half as far below it as above, so the
   * next one above may where the closest, below, does not (2^-1017 is
   * 7.120236347223045e-307, not the 17 digits of the closest).
   */
  private static BigDecimal closest(BigDecimal exact, double a, int p) {
    BigDecimal r = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
    if (Double.parseDouble(r.toString()) == a) {
      return r;
    }
    if (r.compareTo(exact) < 0) {
      BigDecimal up = r.add(r.ulp()); // r has p digits: it is not exact
      if (Double.parseDouble(up.toString()) == a) {
        return up;
      }
    }
    return null;
  }

  private SealerException tooMany() {
    return refuse("holds more than " + maxValues + " values");
  }

  private SealerException refuse(String why) {
    return SealerException.invalidArgument(what + " " + why);
  }

  /** s quoted for an error message: at most 64 characters, escaped, lone surrogates replaced. */
  static String quoted(String s) {
    String t = s.length() > 64 ? s.substring(0, 64) + "..." : s;
    // A round trip through UTF-8 replaces each lone surrogate, which a log may not hold.
    t = new String(t.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
    StringBuilder b = new StringBuilder(t.length() + 2);
    quote(b, t);
    return b.toString();
  }
}
