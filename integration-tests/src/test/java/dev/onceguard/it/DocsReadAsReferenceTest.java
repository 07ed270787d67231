package dev.onceguard.it;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The repository's documentation reads as reference: it says what is true of the code, in the
 * present tense, and never like a work log. The check fails, listing {@code file:line}, on words
 * that only a log would contain ("session", "helper", "today", "yesterday", a first-person "I")
 * and on a reference to a DESIGN.md, a file the repository does not have (the design is
 * docs/design.md).
 *
 * <p>Pages checked: README.md, docs/*.md, docs/reliability/*.md, examples/**&#47;README.md,
 * client-java/README.md, deploy/**&#47;README*; and the comment lines of examples/*.yaml and
 * scripts/demo.sh. Pages a make target regenerates from measurements (docs/benchmarks.md,
 * docs/benchmarks/) are not checked: their text comes from the generator. The first-person check
 * skips code spans and fenced code blocks, where a capital I may be an identifier.
 */
class DocsReadAsReferenceTest {

    private static final Path ROOT = Paths.get("..").toAbsolutePath().normalize();

    private static final Pattern LOG_WORD =
            Pattern.compile("\\b(session|sessions|helper|helpers|today|yesterday)\\b", Pattern.CASE_INSENSITIVE);
    /** The pronoun: a standalone capital I, also in I'm, I've, I'd, I'll. */
    private static final Pattern FIRST_PERSON = Pattern.compile("(?<![\\w./-])I(?![\\w./-]|\\.\\w)");
    private static final Pattern DESIGN_MD = Pattern.compile("(?<![\\w/.-])(?:[\\w./-]*/)?DESIGN\\.md\\b");
    private static final Pattern CODE_SPAN = Pattern.compile("`[^`]*`");

    @Test
    void docsCarryNoWorkLogWordsAndNoMissingDesignMd() {
        List<Path> markdown = markdownPages();
        assertThat(markdown).as("pages found under %s", ROOT).isNotEmpty()
                .contains(ROOT.resolve("README.md"), ROOT.resolve("docs/design.md"));
        List<String> hits = new ArrayList<>();
        for (Path page : markdown) {
            scan(page, lines(page), false, hits);
        }
        for (Path script : commentedFiles()) {
            scan(script, lines(script), true, hits);
        }
        assertThat(hits)
                .as("documentation lines that read like a log, not reference "
                        + "(rewrite them in the present tense, without history or first person):%n%s",
                        String.join("\n", hits))
                .isEmpty();
    }

    @Test
    void checkRecognisesLogWordsAndIgnoresCode() {
        List<String> hits = new ArrayList<>();
        Path page = ROOT.resolve("example.md");
        scan(page, List.of(
                "An earlier session found no gain.",
                "I did not trace them.",
                "Today the pool is larger.",
                "See DESIGN.md for the rest.",
                "The test helper starts Kafka.",
                "Use `I` as the loop variable.",
                "```",
                "I am code",
                "```",
                "Section I.2 and I/O and the -I flag stay.",
                "Present tense: the pool holds ten connections."), false, hits);
        assertThat(hits).containsExactly(
                "example.md:1: session: An earlier session found no gain.",
                "example.md:2: first-person I: I did not trace them.",
                "example.md:3: Today: Today the pool is larger.",
                "example.md:4: DESIGN.md: See DESIGN.md for the rest.",
                "example.md:5: helper: The test helper starts Kafka.");
    }

    private static void scan(Path file, List<String> lines, boolean commentsOnly, List<String> hits) {
        String name = ROOT.relativize(file).toString().replace('\\', '/');
        boolean inFence = false;
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (commentsOnly) {
                int hash = line.indexOf('#');
                if (hash < 0) {
                    continue;
                }
                line = line.substring(hash);
            } else if (line.stripLeading().startsWith("```")) {
                inFence = !inFence;
                continue;
            }
            String where = name + ":" + (i + 1) + ": ";
            Matcher design = DESIGN_MD.matcher(line);
            if (design.find()) {
                hits.add(where + "DESIGN.md: " + line.strip());
            }
            if (inFence) {
                continue;
            }
            String prose = CODE_SPAN.matcher(line).replaceAll("``");
            Matcher word = LOG_WORD.matcher(prose);
            while (word.find()) {
                hits.add(where + word.group() + ": " + line.strip());
            }
            if (FIRST_PERSON.matcher(prose).find()) {
                hits.add(where + "first-person I: " + line.strip());
            }
        }
    }

    private static List<Path> markdownPages() {
        List<Path> pages = new ArrayList<>();
        pages.add(ROOT.resolve("README.md"));
        pages.add(ROOT.resolve("client-java/README.md"));
        pages.addAll(list(ROOT.resolve("docs"), 1, p -> p.toString().endsWith(".md")
                && !p.getFileName().toString().equals("benchmarks.md")));
        pages.addAll(list(ROOT.resolve("docs/reliability"), Integer.MAX_VALUE, p -> p.toString().endsWith(".md")));
        pages.addAll(list(ROOT.resolve("examples"), Integer.MAX_VALUE,
                p -> p.getFileName().toString().equals("README.md") && !p.toString().contains("node_modules")));
        pages.addAll(list(ROOT.resolve("deploy"), Integer.MAX_VALUE,
                p -> p.getFileName().toString().startsWith("README")));
        pages.removeIf(p -> !Files.isRegularFile(p));
        return pages;
    }

    private static List<Path> commentedFiles() {
        List<Path> files = new ArrayList<>(list(ROOT.resolve("examples"), 1,
                p -> p.toString().endsWith(".yaml") || p.toString().endsWith(".yml")));
        files.add(ROOT.resolve("scripts/demo.sh"));
        files.removeIf(p -> !Files.isRegularFile(p));
        return files;
    }

    private static List<Path> list(Path dir, int depth, java.util.function.Predicate<Path> keep) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.walk(dir, depth)) {
            return s.filter(Files::isRegularFile)
                    .filter(p -> !p.toString().contains("/target/") && !p.toString().contains("/node_modules/"))
                    .filter(keep).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static List<String> lines(Path file) {
        try {
            return Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
