package dev.onceguard.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every relative link of the repository's Markdown pages leads somewhere: the file or folder
 * exists, and a {@code #fragment} into a Markdown page names one of its headings (GitHub's
 * anchors: lower case, punctuation dropped, spaces as hyphens, {@code -1}, {@code -2} for repeats).
 * A newcomer follows the README's links first; a dead one is the first thing that does not work.
 */
class DocsLinksTest {

    private static final Path ROOT = Paths.get("..").toAbsolutePath().normalize();
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
    private static final Pattern HEADING = Pattern.compile("^#{1,6}\\s+(.+?)\\s*#*\\s*$");
    private static final Pattern FENCE = Pattern.compile("^\\s*```");

    @Test
    void everyRelativeLinkResolves() {
        List<String> broken = new ArrayList<>();
        for (Path page : pages()) {
            List<String> lines = lines(page);
            boolean inFence = false;
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i);
                if (FENCE.matcher(line).find()) {
                    inFence = !inFence;
                    continue;
                }
                if (inFence) {
                    continue;
                }
                Matcher m = LINK.matcher(line);
                while (m.find()) {
                    String problem = problem(page, m.group(1));
                    if (problem != null) {
                        broken.add(ROOT.relativize(page) + ":" + (i + 1) + ": " + m.group(1) + ": " + problem);
                    }
                }
            }
        }
        assertThat(broken).as("links that lead nowhere:%n%s", String.join("\n", broken)).isEmpty();
    }

    @Test
    void anchorsFollowGithubRules() {
        assertThat(anchors(List.of("## 1. What it is", "### 4.9 Escalation and verdicts",
                "## Choosing the Redis TTL (why 30 days?)", "## `redrive`: a check first", "## Outages", "## Outages")))
                .containsExactlyInAnyOrder("1-what-it-is", "49-escalation-and-verdicts",
                        "choosing-the-redis-ttl-why-30-days", "redrive-a-check-first", "outages", "outages-1");
        assertThat(problem(ROOT.resolve("README.md"), "docs/design.md#no-such-heading")).contains("no heading");
        assertThat(problem(ROOT.resolve("README.md"), "docs/no-such-page.md")).contains("does not exist");
        assertThat(problem(ROOT.resolve("README.md"), "https://example.org/x")).isNull();
    }

    /** Why {@code target}, linked from {@code page}, leads nowhere; null when it resolves. */
    private static String problem(Path page, String target) {
        if (target.matches("^[a-z][a-z0-9+.-]*:.*")) {
            return null; // http:, https:, mailto:
        }
        int hash = target.indexOf('#');
        String path = hash < 0 ? target : target.substring(0, hash);
        String fragment = hash < 0 ? null : target.substring(hash + 1);
        Path file = path.isEmpty() ? page : page.getParent().resolve(path).normalize();
        if (!Files.exists(file)) {
            return "does not exist";
        }
        if (fragment == null || fragment.isEmpty() || !file.toString().endsWith(".md")) {
            return null;
        }
        return anchors(lines(file)).contains(fragment) ? null : "no heading with anchor #" + fragment + " in " + ROOT.relativize(file);
    }

    private static Set<String> anchors(List<String> lines) {
        Set<String> anchors = new HashSet<>();
        Map<String, Integer> seen = new HashMap<>();
        boolean inFence = false;
        for (String line : lines) {
            if (FENCE.matcher(line).find()) {
                inFence = !inFence;
                continue;
            }
            Matcher h = HEADING.matcher(line);
            if (inFence || !h.matches()) {
                continue;
            }
            String slug = h.group(1).toLowerCase(Locale.ROOT)
                    .replaceAll("[^\\p{L}\\p{N} _-]", "")
                    .replace(' ', '-');
            int n = seen.merge(slug, 1, Integer::sum);
            anchors.add(n == 1 ? slug : slug + "-" + (n - 1));
        }
        return anchors;
    }

    private static List<Path> pages() {
        try (Stream<Path> all = Files.walk(ROOT)) {
            return all.filter(p -> p.toString().endsWith(".md"))
                    .filter(p -> {
                        String rel = ROOT.relativize(p).toString();
                        return !rel.startsWith(".") && !rel.contains("/target/") && !rel.contains("node_modules")
                                && !rel.startsWith("target/");
                    })
                    .sorted()
                    .collect(Collectors.toList());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static List<String> lines(Path p) {
        try {
            return Files.readAllLines(p, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
