package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
)

// markdownFiles are the README, ARCHITECTURE.md and every page under docs/,
// relative to the repository root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "ARCHITECTURE.md"}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("docs/ has no pages")
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
	}
	return files
}

var (
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
	heading   = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugStrip = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	scheme    = regexp.MustCompile(`^[a-z]+:`)
)

// anchors are the heading anchors of a Markdown text, as GitHub makes
// them (lower case, punctuation dropped, spaces to hyphens).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		s := strings.ReplaceAll(slugStrip.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
		for n := 0; ; n++ {
			a := s
			if n > 0 {
				a = s + "-" + strconv.Itoa(n)
			}
			if !out[a] {
				out[a] = true
				break
			}
		}
	}
	return out
}

// TestLinksResolve: every relative link of the README and the docs names a
// file of the repository, and every #anchor a heading of its page.
func TestLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	files := markdownFiles(t, root)
	texts := map[string]string{}
	read := func(rel string) (string, bool) {
		if s, ok := texts[rel]; ok {
			return s, true
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", false
		}
		texts[rel] = string(b)
		return string(b), true
	}
	n := 0
	for _, f := range files {
		text, ok := read(f)
		if !ok {
			t.Fatalf("%s: missing", f)
		}
		for _, m := range mdLink.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if scheme.MatchString(target) {
				continue
			}
			n++
			path, frag, _ := strings.Cut(target, "#")
			rel := f
			if path != "" {
				rel = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					t.Errorf("%s: link %s: no such file", f, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			if page, ok := read(rel); ok && !anchors(page)[frag] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", f, target, rel)
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d relative links found", n)
	}
}

// TestReadmeWalkthroughLoads: the files the README's walk-through shows,
// each a code block whose first line names it, make an app that loads with
// no error or warning.
func TestReadmeWalkthroughLoads(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := sectionOf(t, string(readme), "## Your first assistant, in five minutes")
	named := regexp.MustCompile("(?s)```(?:jsonc|yaml|ts)\n(?://|#) ([\\w./-]+)\n(.*?)```")
	app := t.TempDir()
	blocks := named.FindAllStringSubmatch(section, -1)
	if len(blocks) < 4 {
		t.Fatalf("the walk-through shows %d files", len(blocks))
	}
	for _, b := range blocks {
		p := filepath.Join(app, filepath.FromSlash(b[1]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b[2]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := assistant.Inspect(app)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		t.Errorf("walk-through app: %s", p)
	}
	if len(r.App.Assistants) != 1 {
		t.Errorf("walk-through app: assistants %v", r.App.Assistants)
	}
}
