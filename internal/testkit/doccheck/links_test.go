package doccheck_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestMarkdownLinks: every relative link of README.md, CHANGELOG.md and docs/*.md names a file or
// directory that exists, and every #anchor a heading (or an <a id>/<a name>) of its target, as
// GitHub makes them. README.md is short and links into docs/ for everything else, so a link that
// does not resolve loses a reader a whole section. Links outside fenced code blocks are checked;
// absolute URLs are not.
func TestMarkdownLinks(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}, files...)
	anchors := map[string]map[string]bool{} // by absolute path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path)
		require.NoError(t, err)
		anchors[path] = markdownAnchors(string(text))
		return anchors[path]
	}
	var broken []string
	for _, file := range files {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, file)
		require.NoError(t, err)
		for _, l := range markdownLinks(string(text)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file", filepath.ToSlash(rel), l.line, l.target))
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: no such anchor", filepath.ToSlash(rel), l.line, l.target))
			}
		}
	}
	require.Empty(t, broken, "links that do not resolve (%d):\n%s", len(broken), strings.Join(broken, "\n"))
}

// TestMarkdownAnchors pins GitHub's heading anchors, as far as these documents use them.
func TestMarkdownAnchors(t *testing.T) {
	t.Parallel()
	a := markdownAnchors("# Set-up\n## Online upgrades: what is guaranteed, and what to watch\n### POST /v1/callbacks/{correlation_id} — an async result\n" +
		"## In short\n## In short\n```sh\n# not a heading\n```\n<a id=\"kept\"></a>\n## Conversation turns (package `turns`)\n")
	for _, want := range []string{"set-up", "online-upgrades-what-is-guaranteed-and-what-to-watch",
		"post-v1callbackscorrelation_id--an-async-result", "in-short", "in-short-1", "kept", "conversation-turns-package-turns"} {
		require.True(t, a[want], "%s in %v", want, a)
	}
	require.False(t, a["not-a-heading"])
	require.Equal(t, []link{{line: 2, target: "docs/a.md#x"}, {line: 6, target: "b.md"}},
		markdownLinks("x\nsee [a](docs/a.md#x) and\n```\n[c](c.md)\n```\n[b](b.md \"title\")\n"))
}

// link is a Markdown link's target and its line, 1-based.
type link struct {
	line   int
	target string
}

var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownLinks returns the inline links of a Markdown document, outside fenced code blocks.
func markdownLinks(text string) []link {
	var links []link
	for n, line := range outsideFences(text) {
		for _, m := range linkPattern.FindAllStringSubmatch(line, -1) {
			links = append(links, link{line: n + 1, target: m[1]})
		}
	}
	return links
}

var idPattern = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)

// markdownAnchors returns the anchors of a Markdown document: GitHub's slugs of its headings
// (lower case, punctuation dropped, spaces made hyphens, a repeated slug numbered -1, -2 …) and
// the ids of its <a> tags.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	for _, line := range outsideFences(text) {
		for _, m := range idPattern.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		heading := strings.TrimLeft(line, "#")
		if heading == line || !strings.HasPrefix(heading, " ") {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		s := slug.String()
		for i := 1; anchors[s]; i++ {
			s = fmt.Sprintf("%s-%d", slug.String(), i)
		}
		anchors[s] = true
	}
	return anchors
}

// outsideFences returns the lines of text with those inside fenced code blocks (and the fences)
// blanked, so that line numbers stay.
func outsideFences(text string) []string {
	lines := strings.Split(text, "\n")
	inside := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inside = !inside
			lines[i] = ""
			continue
		}
		if inside {
			lines[i] = ""
		}
	}
	return lines
}

// TestReadmeMapsEveryPackage: README.md's map of the repository ("What is here") names every
// directory holding Go files, as `dir/`, so that a newcomer finds each package from it.
func TestReadmeMapsEveryPackage(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, found := strings.Cut(string(readme), "\n## What is here\n")
	require.True(t, found, "README.md has no section ## What is here")
	section, _, _ = strings.Cut(section, "\n## ")
	var missing []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if name := "`" + filepath.ToSlash(dir) + "/`"; dir != "." && !strings.Contains(section, name) && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, missing, "directories with Go files that README.md's map does not name")
}
