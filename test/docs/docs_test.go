// Package docs checks the README and the pages of docs/: every Go block of
// docs/embedding.md is an excerpt of a runnable Example function, every
// relative link resolves, and the README's walk-through app loads.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// examples are the files whose Example functions docs/embedding.md quotes.
var examples = []string{"pipeline/example_test.go", "sandbox/local/example_test.go"}

func TestDocsQuoteExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := sectionOf(t, string(page), "## Embedding")
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) == 0 {
		t.Fatal("the Embedding section quotes no Go code")
	}
	var bodies [][]string
	for _, f := range examples {
		bodies = append(bodies, exampleBodies(t, filepath.Join(root, f))...)
		if !strings.Contains(section, "(../"+f+")") {
			t.Errorf("docs/embedding.md does not link %s", f)
		}
	}
	for _, b := range blocks {
		lines := strings.Split(strings.TrimRight(b[1], "\n"), "\n")
		if !slices.ContainsFunc(bodies, func(body []string) bool { return contains(body, lines) }) {
			t.Errorf("docs/embedding.md quotes code that is in no Example function of %v:\n%s", examples, b[1])
		}
	}
}

// sectionOf returns the section of a Markdown page under heading, up to
// the next one of its level.
func sectionOf(t *testing.T, doc, heading string) string {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no %q section", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// exampleBodies returns the bodies of the Example functions of a file, one
// indent level removed, as lines.
func exampleBodies(t *testing.T, path string) [][]string {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		var lines []string
		for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		out = append(out, lines)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no Example function", path)
	}
	return out
}

// contains reports whether part is a run of consecutive lines of whole.
func contains(whole, part []string) bool {
	for i := 0; i+len(part) <= len(whole); i++ {
		if slices.Equal(whole[i:i+len(part)], part) {
			return true
		}
	}
	return false
}
