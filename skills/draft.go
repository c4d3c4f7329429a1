package skills

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Limits of a Draft: an agent writes it through a tool call and a person
// reads it before approving it, so it stays small.
const (
	// MaxDraftFiles bounds the files beside SKILL.md.
	MaxDraftFiles = 16
	// MaxDraftFileBytes bounds one of those files.
	MaxDraftFileBytes = 64 << 10
	// MaxInstructionsBytes bounds the instructions (the SKILL.md body); the
	// specification recommends keeping them under 500 lines.
	MaxInstructionsBytes = 64 << 10
	// MaxDraftBytes bounds the whole skill: SKILL.md and its files.
	MaxDraftBytes = 256 << 10
	// maxFileDepth bounds how deep a file sits below its top folder.
	maxFileDepth = 4
)

// DraftFolders are the folders a draft's files go in: the specification's
// optional folders of a skill.
var DraftFolders = []string{"assets", "references", "scripts"}

// pathSegment is one part of a draft file's path: no hidden names, nothing
// a shell or a path would read specially.
var pathSegment = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`)

// Draft is a skill written by an agent rather than found in a folder: the
// parts of a skill folder, not yet files. Build checks it with the rules
// Discover applies to a skill folder (the same front-matter validation
// agentbox check reports) and the limits above, and turns it into a Skill
// held in memory.
type Draft struct {
	// Name is the skill's name, and its folder's.
	Name string `json:"name"`
	// Description says what the skill does and when to use it.
	Description string `json:"description"`
	// Instructions are the body of SKILL.md (Markdown, no front matter).
	Instructions string `json:"instructions"`
	// Files are the skill's scripts, references and assets.
	Files []File `json:"files,omitempty"`
}

// File is one file of a skill held in memory. Path is slash-separated and
// relative to the skill folder ("scripts/check.sh"); files under scripts/
// are installed executable.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// SkillFile renders the draft's SKILL.md: front matter with its name and
// description, then the instructions.
func (d *Draft) SkillFile() []byte {
	fm := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "name"}, {Kind: yaml.ScalarNode, Value: d.Name},
		{Kind: yaml.ScalarNode, Value: "description"}, {Kind: yaml.ScalarNode, Value: d.Description},
	}}
	var b bytes.Buffer
	b.WriteString("---\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(fm); err != nil {
		// Encoding a mapping of two strings cannot fail; keep the file
		// parsable if it ever does.
		fmt.Fprintf(&b, "name: %q\ndescription: %q\n", d.Name, d.Description)
	}
	_ = enc.Close()
	b.WriteString("---\n\n")
	b.WriteString(strings.TrimLeft(d.Instructions, "\r\n"))
	if !strings.HasSuffix(d.Instructions, "\n") {
		b.WriteString("\n")
	}
	return b.Bytes()
}

// Build validates the draft and returns it as a skill held in memory (Dir
// is empty; Sync writes its files and Body reads its instructions). Each
// problem's File names the draft field it concerns ("name",
// "description", "instructions", "files[2].path"), so that whoever wrote
// the draft can fix it; a skill is returned only when there are none.
func (d *Draft) Build() (*Skill, []Problem) {
	var probs []Problem
	add := func(field, format string, args ...any) {
		probs = append(probs, Problem{File: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !utf8.ValidString(d.Name) || !utf8.ValidString(d.Description) {
		add("name", "name and description must be UTF-8 text")
		return nil, probs
	}
	switch ins := d.Instructions; {
	case strings.TrimSpace(ins) == "":
		add("instructions", "instructions are empty: write the SKILL.md body, the steps to follow when the skill applies")
	case len(ins) > MaxInstructionsBytes:
		add("instructions", "instructions are %d bytes; the limit is %d (keep SKILL.md short and put details in references/ files)", len(ins), MaxInstructionsBytes)
	case strings.HasPrefix(strings.TrimLeft(ins, "\r\n\ufeff \t"), "---"):
		add("instructions", "instructions start with front matter (---): give only the SKILL.md body; name and description are fields of their own")
	case !utf8.ValidString(ins) || strings.IndexByte(ins, 0) >= 0:
		add("instructions", "instructions must be UTF-8 text without NUL bytes")
	}
	skillFile := d.SkillFile()
	// The same validation as a skill folder's: parse the rendered file.
	s, fmProbs := parseSkill(FileName, skillFile, d.Name)
	for _, p := range fmProbs {
		if p.Warning() {
			continue // the front matter holds name and description only
		}
		p.File, p.Line, p.Col = fieldOf(p, skillFile), 0, 0
		probs = append(probs, p)
	}
	total := len(skillFile)
	if len(d.Files) > MaxDraftFiles {
		add("files", "%d files; a skill may have at most %d beside SKILL.md", len(d.Files), MaxDraftFiles)
	}
	seen := map[string]int{}
	files := []File{{Path: FileName, Content: string(skillFile)}}
	for i, f := range d.Files {
		field := fmt.Sprintf("files[%d]", i)
		if msg := checkFilePath(f.Path); msg != "" {
			add(field+".path", "%s", msg)
			continue
		}
		if j, dup := seen[f.Path]; dup {
			add(field+".path", "%q is also files[%d]", f.Path, j)
			continue
		}
		seen[f.Path] = i
		switch {
		case len(f.Content) > MaxDraftFileBytes:
			add(field+".content", "%s is %d bytes; the limit is %d", f.Path, len(f.Content), MaxDraftFileBytes)
		case !utf8.ValidString(f.Content) || strings.IndexByte(f.Content, 0) >= 0:
			add(field+".content", "%s must be UTF-8 text without NUL bytes", f.Path)
		}
		total += len(f.Content)
		files = append(files, f)
	}
	// A file cannot also be a folder of another ("scripts/a" and
	// "scripts/a/b").
	for p, i := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if j, ok := seen[dir]; ok {
				add(fmt.Sprintf("files[%d].path", j), "%q is a file and the folder of files[%d] (%s)", dir, i, p)
			}
		}
	}
	if total > MaxDraftBytes {
		add("files", "the skill is %d bytes with SKILL.md; the limit is %d", total, MaxDraftBytes)
	}
	if len(probs) > 0 || s == nil {
		return nil, SortProblems(probs)
	}
	s.files = files
	return s, nil
}

// checkFilePath says what is wrong with a draft file's path ("" when
// nothing is).
func checkFilePath(p string) string {
	if p == "" {
		return "path is empty: name the file, such as scripts/check.sh"
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p {
		return fmt.Sprintf("path %q must be relative to the skill folder, with / between clean parts (such as scripts/check.sh)", p)
	}
	parts := strings.Split(p, "/")
	top := parts[0]
	if len(parts) < 2 || !contains(DraftFolders, top) {
		return fmt.Sprintf("path %q must be in one of the skill's folders %s (such as scripts/check.sh); SKILL.md is written from name, description and instructions",
			p, strings.Join(DraftFolders, "/, ")+"/")
	}
	if len(parts)-1 > maxFileDepth {
		return fmt.Sprintf("path %q is more than %d folders deep", p, maxFileDepth)
	}
	for _, seg := range parts {
		if !pathSegment.MatchString(seg) {
			return fmt.Sprintf("path %q: %q is not a plain file or folder name (letters, digits, '.', '_', '-'; not hidden)", p, seg)
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// fieldOf names the draft field a problem of the rendered SKILL.md is
// about, from the line it points at: the front matter holds name first,
// then description (which may span lines).
func fieldOf(p Problem, skillFile []byte) string {
	if p.Line <= 0 {
		return FileName
	}
	lines := bytes.Split(skillFile, []byte("\n"))
	if p.Line-1 < len(lines) && bytes.HasPrefix(lines[p.Line-1], []byte("name:")) {
		return "name"
	}
	if p.Line > 2 {
		return "description"
	}
	// Line 1 (the opening ---) carries "x is required" problems, which
	// name their field.
	for _, f := range []string{"name", "description"} {
		if strings.HasPrefix(p.Msg, f+" ") {
			return f
		}
	}
	return FileName
}

// Files returns the files of a skill held in memory (SKILL.md first), nil
// for a skill found in a folder.
func (s *Skill) Files() []File { return s.files }
