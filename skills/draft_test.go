package skills

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func goodDraft() Draft {
	return Draft{
		Name:         "release-notes",
		Description:  "Write release notes from the git log. Use when asked for release notes or a changelog.",
		Instructions: "# Release notes\n\n1. Run scripts/log.sh.\n2. Group the commits by kind.\n",
		Files: []File{
			{Path: "scripts/log.sh", Content: "#!/bin/sh\ngit log --oneline \"$@\"\n"},
			{Path: "references/style.md", Content: "Short lines.\n"},
		},
	}
}

func TestDraftBuild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(d *Draft)
		want string // "" = valid; else the joined problems
	}{
		{"valid", func(*Draft) {}, ""},
		{"multi-line description", func(d *Draft) { d.Description = "Line one: with a colon.\nLine two # not a comment." }, ""},
		{"bad name", func(d *Draft) { d.Name = "Release_Notes" },
			`name: invalid name "Release_Notes": use lowercase letters, digits and single hyphens, not at the start or end`},
		{"path name", func(d *Draft) { d.Name = "../notes" },
			`name: invalid name "../notes": use lowercase letters, digits and single hyphens, not at the start or end`},
		{"empty name", func(d *Draft) { d.Name = "" }, "name: name is empty"},
		{"long name", func(d *Draft) { d.Name = strings.Repeat("a", 65) },
			`name: name "` + strings.Repeat("a", 65) + `" is longer than 64 characters`},
		{"empty description", func(d *Draft) { d.Description = " " }, "description: description is empty"},
		{"long description", func(d *Draft) { d.Description = "x\n" + strings.Repeat("y", MaxDescriptionLen) },
			"description: description is 1026 characters long; the limit is 1024"},
		{"no instructions", func(d *Draft) { d.Instructions = "\n " },
			"instructions: instructions are empty: write the SKILL.md body, the steps to follow when the skill applies"},
		{"front matter in instructions", func(d *Draft) { d.Instructions = "---\nname: x\n---\nbody" },
			"instructions: instructions start with front matter (---): give only the SKILL.md body; name and description are fields of their own"},
		{"long instructions", func(d *Draft) { d.Instructions = strings.Repeat("i", MaxInstructionsBytes+1) },
			"instructions: instructions are 65537 bytes; the limit is 65536 (keep SKILL.md short and put details in references/ files)"},
		{"file outside the folders", func(d *Draft) { d.Files[0].Path = "run.sh" },
			`files[0].path: path "run.sh" must be in one of the skill's folders assets/, references/, scripts/ (such as scripts/check.sh); SKILL.md is written from name, description and instructions`},
		{"SKILL.md as a file", func(d *Draft) { d.Files[0].Path = "SKILL.md" },
			`files[0].path: path "SKILL.md" must be in one of the skill's folders assets/, references/, scripts/ (such as scripts/check.sh); SKILL.md is written from name, description and instructions`},
		{"escaping path", func(d *Draft) { d.Files[0].Path = "scripts/../../x" },
			`files[0].path: path "scripts/../../x" must be relative to the skill folder, with / between clean parts (such as scripts/check.sh)`},
		{"absolute path", func(d *Draft) { d.Files[0].Path = "/etc/passwd" },
			`files[0].path: path "/etc/passwd" must be relative to the skill folder, with / between clean parts (such as scripts/check.sh)`},
		{"hidden file", func(d *Draft) { d.Files[0].Path = "scripts/.env" },
			`files[0].path: path "scripts/.env": ".env" is not a plain file or folder name (letters, digits, '.', '_', '-'; not hidden)`},
		{"empty path", func(d *Draft) { d.Files[0].Path = "" }, "files[0].path: path is empty: name the file, such as scripts/check.sh"},
		{"deep path", func(d *Draft) { d.Files[0].Path = "assets/a/b/c/d/e" }, `files[0].path: path "assets/a/b/c/d/e" is more than 4 folders deep`},
		{"duplicate", func(d *Draft) { d.Files[1].Path = d.Files[0].Path }, `files[1].path: "scripts/log.sh" is also files[0]`},
		{"file and folder", func(d *Draft) { d.Files[1].Path = "scripts/log.sh/x" },
			`files[0].path: "scripts/log.sh" is a file and the folder of files[1] (scripts/log.sh/x)`},
		{"big file", func(d *Draft) { d.Files[1].Content = strings.Repeat("r", MaxDraftFileBytes+1) },
			"files[1].content: references/style.md is 65537 bytes; the limit is 65536"},
		{"binary file", func(d *Draft) { d.Files[1].Content = "a\x00b" },
			"files[1].content: references/style.md must be UTF-8 text without NUL bytes"},
		{"too many files", func(d *Draft) {
			d.Files = nil
			for i := range MaxDraftFiles + 1 {
				d.Files = append(d.Files, File{Path: "references/r" + string(rune('a'+i)) + ".md"})
			}
		}, "files: 17 files; a skill may have at most 16 beside SKILL.md"},
		{"too big", func(d *Draft) {
			d.Files = nil
			for i := range 5 {
				d.Files = append(d.Files, File{Path: "references/r" + string(rune('a'+i)) + ".md", Content: strings.Repeat("z", MaxDraftFileBytes)})
			}
		}, "files: the skill is 327879 bytes with SKILL.md; the limit is 262144"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := goodDraft()
			tt.edit(&d)
			s, probs := d.Build()
			var got []string
			for _, p := range probs {
				got = append(got, p.String())
			}
			if g := strings.Join(got, "\n"); g != tt.want {
				t.Fatalf("problems:\n got %s\nwant %s", g, tt.want)
			}
			if tt.want == "" && (s == nil || s.Name != d.Name || s.Description != d.Description) {
				t.Fatalf("skill = %+v", s)
			}
		})
	}
}

// TestDraftSyncAndDiscover: a built draft synced into a workspace is a
// skill folder that Discover (what agentbox check uses) finds valid, with
// the same name, description and body, and executable scripts.
func TestDraftSyncAndDiscover(t *testing.T) {
	t.Parallel()
	d := goodDraft()
	d.Description = "Write release notes: grouped, short.\nUse for changelogs."
	s, probs := d.Build()
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if body, err := s.Body(); err != nil || body != d.Instructions {
		t.Fatalf("body = %q, %v", body, err)
	}
	wsDir := t.TempDir()
	ws, err := sandbox.OpenWorkspace(wsDir, -1, -1)
	t.Cleanup(func() { ws.Close() })
	if err != nil {
		t.Fatal(err)
	}
	if err := Sync(context.Background(), ws, ".claude/skills", []*Skill{s}); err != nil {
		t.Fatal(err)
	}
	got := tree(t, filepath.Join(wsDir, ".claude/skills"))
	want := "release-notes/ release-notes/SKILL.md release-notes/references/ release-notes/references/style.md release-notes/scripts/ release-notes/scripts/log.sh"
	if strings.Join(got, " ") != want {
		t.Fatalf("tree %v", got)
	}
	st, err := os.Stat(filepath.Join(wsDir, ".claude/skills/release-notes/scripts/log.sh"))
	if err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("script not executable: %v %v", st, err)
	}
	list, probs := Discover(filepath.Join(wsDir, ".claude/skills"))
	if len(probs) > 0 || len(list) != 1 {
		t.Fatalf("discover: %v %v", list, probs)
	}
	if list[0].Name != d.Name || list[0].Description != d.Description {
		t.Fatalf("discovered %+v", list[0])
	}
	if body, err := list[0].Body(); err != nil || body != d.Instructions {
		t.Fatalf("discovered body = %q, %v", body, err)
	}
}

func FuzzDraftBuild(f *testing.F) {
	f.Add("release-notes", "Notes.", "# Do\n", "scripts/a.sh", "x")
	f.Add("a: b", "- [x", "---\n", "../x", "\x00")
	f.Fuzz(func(t *testing.T, name, desc, ins, p, content string) {
		d := Draft{Name: name, Description: desc, Instructions: ins, Files: []File{{Path: p, Content: content}}}
		s, probs := d.Build()
		if (s == nil) == (len(probs) == 0) {
			t.Fatalf("skill %v with problems %v", s, probs)
		}
		if s == nil {
			return
		}
		// What Build accepts is a valid skill folder once written.
		if _, fp := parseSkill(FileName, []byte(s.files[0].Content), name); len(fp) > 0 {
			t.Fatalf("built SKILL.md does not parse: %v", fp)
		}
		if checkFilePath(p) != "" {
			t.Fatalf("accepted path %q", p)
		}
	})
}

// TestFingerprint: a skill built again from the same draft has the same
// fingerprint; any change of what it installs changes it.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	build := func(edit func(d *Draft)) string {
		d := goodDraft()
		edit(&d)
		s, probs := d.Build()
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return s.Fingerprint()
	}
	same := build(func(*Draft) {})
	if build(func(*Draft) {}) != same {
		t.Error("the same draft has two fingerprints")
	}
	for name, edit := range map[string]func(d *Draft){
		"instructions": func(d *Draft) { d.Instructions += "3. Done.\n" },
		"file content": func(d *Draft) { d.Files[1].Content = "Long lines.\n" },
		"file path":    func(d *Draft) { d.Files[1].Path = "references/tone.md" },
		"description":  func(d *Draft) { d.Description += " Also tags." },
	} {
		if build(edit) == same {
			t.Errorf("a changed %s keeps the fingerprint", name)
		}
	}
	if (&Skill{Name: "a", Dir: "/x/a"}).Fingerprint() == (&Skill{Name: "a", Dir: "/y/a"}).Fingerprint() {
		t.Error("two folders, one fingerprint")
	}
}
