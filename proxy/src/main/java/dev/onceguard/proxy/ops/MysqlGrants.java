package dev.onceguard.proxy.ops;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the lines of MySQL's / MariaDB's {@code SHOW GRANTS}: which privileges hold on a database,
 * from global ({@code *.*}) and database-level grants ({@code `db`.*}, with {@code %} and
 * {@code _} wildcards and {@code \_} escapes). Table- and column-level grants do not count: the
 * sidecar's tables may not exist yet. Pure functions.
 */
final class MysqlGrants {
  private static final Pattern GRANT = Pattern.compile("^GRANT (.+?) ON (?:(?:TABLE|FUNCTION|PROCEDURE) )?(\\S+) TO ", Pattern.CASE_INSENSITIVE);

  private MysqlGrants() {}

  /** What the sidecar needs: reading and writing its rows, and creating and changing its tables when it migrates. */
  static Set<String> needed(boolean migrates) {
    Set<String> s = new LinkedHashSet<>(List.of("SELECT", "INSERT", "UPDATE", "DELETE"));
    if (migrates) {
      s.addAll(List.of("CREATE", "ALTER"));
    }
    return s;
  }

  /** The privileges of {@code needed} that no grant line gives on {@code database}, in the order of {@code needed}. */
  static Set<String> missing(List<String> grantLines, String database, Set<String> needed) {
    Set<String> held = new LinkedHashSet<>();
    for (String line : grantLines) {
      Matcher m = GRANT.matcher(line.trim());
      if (!m.find() || !coversDatabase(m.group(2), database)) {
        continue;
      }
      for (String p : privileges(m.group(1))) {
        if (p.equals("ALL") || p.equals("ALL PRIVILEGES")) {
          held.addAll(needed);
        } else {
          held.add(p);
        }
      }
    }
    Set<String> out = new LinkedHashSet<>(needed);
    out.removeAll(held);
    return out;
  }

  /** Top-level comma-separated names, upper case; column-level ones ({@code SELECT (a, b)}) left out. */
  private static List<String> privileges(String list) {
    List<String> out = new ArrayList<>();
    int depth = 0;
    StringBuilder cur = new StringBuilder();
    boolean columns = false;
    for (char c : (list + ",").toCharArray()) {
      if (c == '(') {
        depth++;
        columns = true;
      } else if (c == ')') {
        depth--;
      } else if (c == ',' && depth == 0) {
        if (!columns) {
          out.add(cur.toString().trim().toUpperCase(Locale.ROOT));
        }
        cur.setLength(0);
        columns = false;
      } else if (depth == 0) {
        cur.append(c);
      }
    }
    return out;
  }

  /** {@code *.*}, or {@code db.*} whose name or pattern matches {@code database}; a table-level scope does not. */
  private static boolean coversDatabase(String scope, String database) {
    if (scope.equals("*.*") || scope.equals("*")) {
      return true;
    }
    if (!scope.endsWith(".*")) {
      return false;
    }
    String db = scope.substring(0, scope.length() - 2);
    if (db.startsWith("`") && db.endsWith("`") && db.length() >= 2) {
      db = db.substring(1, db.length() - 1).replace("``", "`");
    }
    StringBuilder regex = new StringBuilder();
    for (int i = 0; i < db.length(); i++) {
      char c = db.charAt(i);
      if (c == '\\' && i + 1 < db.length()) {
        regex.append(Pattern.quote(String.valueOf(db.charAt(++i))));
      } else if (c == '%') {
        regex.append(".*");
      } else if (c == '_') {
        regex.append('.');
      } else {
        regex.append(Pattern.quote(String.valueOf(c)));
      }
    }
    return Pattern.compile(regex.toString(), Pattern.CASE_INSENSITIVE).matcher(database).matches();
  }
}
