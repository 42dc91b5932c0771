package io.github.mcpsealer;

import java.text.Normalizer;
import java.util.Locale;

/**
 * The look-alike rule of FORMAT.md, "Request digest", step 3: a params
 * member whose name is not a salient name but folds to one ({@code NAME},
 * {@code argumentſ}, {@code urı}, fullwidth {@code ａｒｇｕｍｅｎｔｓ}) is
 * refused, because a server that binds params case-insensitively or through
 * Unicode's foldings could act on a member the digest ignores. It is
 * mcpdigest.LookAlike of the Go module and look_alike of the Python client.
 */
public final class LookAlike {
  private LookAlike() {}

  /**
   * Fold returns name folded by the five steps of FORMAT.md: U+017F (ſ)
   * to {@code s}, U+0130 (İ) and U+0131 (ı) to {@code i}, U+212A (the
   * Kelvin sign) to {@code k}; NFKC; full case folding; NFKC; the first
   * step again. An ASCII name folds to its lower case.
   *
   * <p>Java has no full case folding: upper case then lower case stands for
   * it, with U+1E9E (ẞ) taken to {@code ss} first, as folding takes it and
   * those mappings do not. That maps to ASCII exactly what full folding maps
   * there, so wherever the Go module's Fold gives an ASCII name this gives
   * the same one; elsewhere the two may differ (the Go one takes each
   * character to its least case variant). Unicode tables are the Java
   * runtime's.
   */
  public static String fold(String name) {
    String s = Normalizer.normalize(simple(name), Normalizer.Form.NFKC);
    s = s.replace("\u1E9E", "ss").toUpperCase(Locale.ROOT).toLowerCase(Locale.ROOT);
    return simple(Normalizer.normalize(s, Normalizer.Form.NFKC));
  }

  /**
   * LookAlike reports whether name is not salient but a decoder that matches
   * names loosely reads it as salient: whether both fold to one name.
   * {@code salient} is meant to be an ASCII name (those of FORMAT.md are).
   */
  public static boolean lookAlike(String name, String salient) {
    if (name.equals(salient)) {
      return false;
    }
    String want = fold(salient);
    if (ascii(name)) {
      return name.toLowerCase(Locale.ROOT).equals(want);
    }
    // A name longer than an ASCII one folds to no ASCII name that short:
    // NFKC and case folding take each code point to one or more, and a
    // composition makes a letter with its mark, never ASCII. Checked first,
    // as NFKC's cost grows with the square of a run of combining marks.
    if (ascii(salient) && name.codePointCount(0, name.length()) > salient.length()) {
      return false;
    }
    return fold(name).equals(want);
  }

  /** Step 1 (and 5): the simple case mappings that take a non-ASCII character to an ASCII letter. */
  private static String simple(String s) {
    for (int i = 0; i < s.length(); i++) {
      switch (s.charAt(i)) {
        case '\u017F', '\u0130', '\u0131', '\u212A' -> {
          return s.replace('\u017F', 's').replace('\u0130', 'i').replace('\u0131', 'i').replace('\u212A', 'k');
        }
        default -> {}
      }
    }
    return s;
  }

  private static boolean ascii(String s) {
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) >= 0x80) {
        return false;
      }
    }
    return true;
  }
}
