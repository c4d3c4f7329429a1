package skills

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func TestParseSkill(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxDescriptionLen+1)
	tests := []struct {
		name string
		in   string
		want string // "" = valid; else the joined problems
	}{
		{"minimal", "---\nname: code-review\ndescription: Review code.\n---\n# Body\n", ""},
		{"all fields", "---\nname: code-review\ndescription: >\n  Review code.\nlicense: MIT\ncompatibility: git\nmetadata:\n  author: me\n  version: \"1.0\"\nallowed-tools: Bash(git:*)  Read\n---\n", ""},
		{"tools list", "---\nname: code-review\ndescription: d\nallowed-tools:\n  - Read\n  - Grep\n---\n", ""},
		{"leading blank lines", "\n\n---\nname: code-review\ndescription: d\n---\n", ""},
		{"no front matter", "# Code review\n", "x/SKILL.md:1:1: missing front matter: SKILL.md must start with --- followed by name and description"},
		{"unclosed", "---\nname: code-review\n", "x/SKILL.md:1:1: front matter is not closed: add a line with --- after it"},
		{"empty", "---\n---\nbody", "x/SKILL.md:1:1: front matter is empty: name and description are required"},
		{"not a mapping", "---\n- a\n---\n", "x/SKILL.md:2:1: front matter must be a mapping of fields (name: ..., description: ...)"},
		{"bad yaml", "---\nname: code-review\ndescription: [a\n---\n", "x/SKILL.md:2:1: front matter: did not find expected ',' or ']'"},
		{"name mismatch", "---\nname: review\ndescription: d\n---\n", `x/SKILL.md:2:7: name "review" must equal its folder name "code-review"`},
		{"bad name", "---\nname: Code_Review\ndescription: d\n---\n", `x/SKILL.md:2:7: invalid name "Code_Review": use lowercase letters, digits and single hyphens, not at the start or end`},
		{"double hyphen", "---\nname: code--review\ndescription: d\n---\n", `x/SKILL.md:2:7: invalid name "code--review": use lowercase letters, digits and single hyphens, not at the start or end`},
		{"long name", "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", `x/SKILL.md:2:7: name "` + strings.Repeat("a", 65) + `" is longer than 64 characters`},
		{"missing name", "---\ndescription: d\n---\n", "x/SKILL.md:1:1: name is required"},
		{"missing description", "---\nname: code-review\n---\n", "x/SKILL.md:1:1: description is required: say what the skill does and when to use it"},
		{"empty description", "---\nname: code-review\ndescription: \"  \"\n---\n", "x/SKILL.md:3:14: description is empty"},
		{"long description", "---\nname: code-review\ndescription: " + long + "\n---\n", "x/SKILL.md:3:14: description is 1025 characters long; the limit is 1024"},
		{"long compatibility", "---\nname: code-review\ndescription: d\ncompatibility: " + strings.Repeat("c", 501) + "\n---\n", "x/SKILL.md:4:16: compatibility is 501 characters long; the limit is 500"},
		{"unknown key", "---\nname: code-review\ndescription: d\nversion: 2\n---\n", `x/SKILL.md:4:1: unknown front-matter field "version" (known: allowed-tools, compatibility, description, license, metadata, name)`},
		{"duplicate key", "---\nname: code-review\nname: code-review\ndescription: d\n---\n", `x/SKILL.md:3:1: duplicate front-matter field "name"`},
		{"metadata not map", "---\nname: code-review\ndescription: d\nmetadata: [a]\n---\n", "x/SKILL.md:4:11: metadata: want a mapping of strings, got a list"},
		{"metadata nested", "---\nname: code-review\ndescription: d\nmetadata:\n  a: {b: c}\n---\n", "x/SKILL.md:5:6: metadata.a: want a string, got a mapping"},
		{"description list", "---\nname: code-review\ndescription: [a]\n---\n", "x/SKILL.md:3:14: description: want a string, got a list\nx/SKILL.md:3:14: description is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, probs := parseSkill("x/SKILL.md", []byte(tt.in), "code-review")
			var got []string
			for _, p := range probs {
				got = append(got, p.String())
			}
			if g := strings.Join(got, "\n"); g != tt.want {
				t.Fatalf("problems:\n got %s\nwant %s", g, tt.want)
			}
			if tt.want == "" && (s == nil || s.Name != "code-review") {
				t.Fatalf("skill = %+v", s)
			}
		})
	}
}

func TestParseSkillFields(t *testing.T) {
	t.Parallel()
	in := "---\nname: code-review\ndescription: >\n  Review code\n  carefully.\nlicense: Apache-2.0\ncompatibility: Requires git\nmetadata:\n  author: team\n  version: 1.0\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\n# Code Review\n"
	s, probs := parseSkill("x", []byte(in), "code-review")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if s.Description != "Review code carefully.\n" || s.License != "Apache-2.0" || s.Compatibility != "Requires git" ||
		s.Metadata["author"] != "team" || s.Metadata["version"] != "1.0" || s.AllowedTools != "Read Bash(git:*)" {
		t.Fatalf("skill = %+v", s)
	}
}

// writeSkill creates dir/name/SKILL.md with front matter for name.
func writeSkill(t *testing.T, dir, name, extra string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\n\n# " + name + "\n\nDo it well.\n" + extra
	if err := os.WriteFile(filepath.Join(d, FileName), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSkill(t, dir, "deploy", "")
	writeSkill(t, dir, "code-review", "")
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, FileName), []byte("---\nname: other\ndescription: d\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, probs := Discover(dir)
	var got []string
	for _, p := range probs {
		got = append(got, p.String())
	}
	want := `bad/SKILL.md:2:7: name "other" must equal its folder name "bad"` + "\nempty: skill folder has no SKILL.md"
	if g := strings.Join(got, "\n"); g != want {
		t.Fatalf("problems:\n%s\nwant\n%s", g, want)
	}
	if len(list) != 2 || list[0].Name != "code-review" || list[1].Name != "deploy" {
		t.Fatalf("skills = %v", list)
	}
	body, err := list[0].Body()
	if err != nil {
		t.Fatal(err)
	}
	if body != "# code-review\n\nDo it well.\n" {
		t.Fatalf("body = %q", body)
	}
	if l, p := Discover(filepath.Join(dir, "missing")); l != nil || p != nil {
		t.Fatalf("missing dir: %v %v", l, p)
	}
}

func TestSync(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	cr := writeSkill(t, src, "code-review", "")
	mustWrite(t, filepath.Join(cr, "scripts", "check.sh"), "#!/bin/sh\necho ok\n", 0o755)
	mustWrite(t, filepath.Join(cr, "references", "guide.md"), "guide", 0o644)
	mustWrite(t, filepath.Join(cr, "assets", "deep", "t.txt"), "tmpl", 0o600)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	mustWrite(t, outside, "secret", 0o644)
	if err := os.Symlink(outside, filepath.Join(cr, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("references/guide.md", filepath.Join(cr, "alias.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(cr, "loop")); err != nil {
		t.Fatal(err)
	}
	dep := writeSkill(t, src, "deploy", "")
	list, probs := Discover(src)
	if len(probs) > 0 {
		t.Fatal(probs)
	}

	wsDir := t.TempDir()
	ws, err := sandbox.OpenWorkspace(wsDir, -1, -1)
	t.Cleanup(func() { ws.Close() })
	if err != nil {
		t.Fatal(err)
	}
	// What the agent left behind: a stale skill, a stale file in a synced
	// skill, and a modified SKILL.md.
	mustWrite(t, filepath.Join(wsDir, ".claude/skills/stale/SKILL.md"), "old", 0o644)
	mustWrite(t, filepath.Join(wsDir, ".claude/skills/code-review/extra.txt"), "agent", 0o644)
	mustWrite(t, filepath.Join(wsDir, ".claude/skills/deploy/SKILL.md"), "tampered", 0o644)
	if err := Sync(context.Background(), ws, ".claude/skills", list); err != nil {
		t.Fatal(err)
	}
	got := tree(t, filepath.Join(wsDir, ".claude/skills"))
	want := []string{
		"code-review/", "code-review/SKILL.md", "code-review/alias.md", "code-review/assets/", "code-review/assets/deep/",
		"code-review/assets/deep/t.txt", "code-review/references/", "code-review/references/guide.md",
		"code-review/scripts/", "code-review/scripts/check.sh", "deploy/", "deploy/SKILL.md",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tree:\n%v\nwant\n%v", got, want)
	}
	st, err := os.Stat(filepath.Join(wsDir, ".claude/skills/code-review/scripts/check.sh"))
	if err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("script lost its executable bit: %v %v", st.Mode(), err)
	}
	b, _ := os.ReadFile(filepath.Join(wsDir, ".claude/skills/deploy/SKILL.md"))
	want0, _ := os.ReadFile(filepath.Join(dep, FileName))
	if string(b) != string(want0) {
		t.Fatalf("deploy SKILL.md not restored: %q", b)
	}

	// The agent replaces .claude with a symlink out of the workspace; the
	// next sync must not write through it.
	escape := t.TempDir()
	if err := os.RemoveAll(filepath.Join(wsDir, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(escape, filepath.Join(wsDir, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := Sync(context.Background(), ws, ".claude/skills", list[:1]); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(escape); len(ents) != 0 {
		t.Fatalf("sync wrote through the agent's symlink: %v", ents)
	}
	if st, err := os.Lstat(filepath.Join(wsDir, ".claude")); err != nil || !st.IsDir() {
		t.Fatalf(".claude is not a real folder: %v", err)
	}
	if got := tree(t, filepath.Join(wsDir, ".claude/skills")); got[len(got)-1] == "deploy/SKILL.md" {
		t.Fatalf("stale skill kept: %v", got)
	}

	// An empty list leaves an empty folder.
	if err := Sync(context.Background(), ws, ".claude/skills", nil); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, filepath.Join(wsDir, ".claude/skills")); len(got) != 0 {
		t.Fatalf("not emptied: %v", got)
	}
	for _, bad := range []string{"", ".", "../x", "/etc"} {
		if err := Sync(context.Background(), ws, bad, nil); err == nil {
			t.Errorf("Sync(%q) accepted", bad)
		}
	}
}

func mustWrite(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzParseSkill checks that front-matter parsing never panics and that
// every problem it reports carries a position inside the file.
func FuzzParseSkill(f *testing.F) {
	for _, s := range []string{
		"---\nname: code-review\ndescription: d\n---\nbody",
		"---\nname: [\n---\n",
		"---\n&a [*a]\n---\n",
		"\n---\nmetadata: {a: *b}\n---",
		"---\nallowed-tools:\n - a\n - {b: c}\n---\n",
		"no front matter",
		"---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, probs := parseSkill("x/SKILL.md", data, "x")
		if s == nil && len(probs) == 0 {
			t.Fatal("no skill and no problem")
		}
		lines := strings.Count(string(data), "\n") + 2
		for _, p := range probs {
			if p.Line < 1 || p.Col < 1 || p.Line > lines || p.File != "x/SKILL.md" {
				t.Fatalf("bad position %+v (file has %d lines)", p, lines)
			}
		}
	})
}
