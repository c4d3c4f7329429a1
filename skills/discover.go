package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// maxSkillFile bounds SKILL.md: instructions are meant to stay short (the
// specification recommends under 500 lines), so a huge file is a mistake.
const maxSkillFile = 4 << 20

// Discover finds the skills in dir: every sub-folder holding a SKILL.md,
// sorted by name. It reads only the front matter into each Skill (the body
// loads on demand with Body). A missing dir means no skills. Problems
// (invalid front matter, a folder without SKILL.md) are returned together,
// with files relative to dir; skills with problems are left out. Hidden
// entries (".name") and plain files in dir are ignored.
func Discover(dir string) ([]*Skill, []Problem) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []Problem{{File: ".", Msg: fmt.Sprintf("list skills: %v", unwrapPath(err))}}
	}
	var out []*Skill
	var probs []Problem
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		sub := filepath.Join(dir, name)
		if !e.IsDir() {
			// A symlinked skill folder is allowed; its content is still
			// confined to it when synced.
			st, err := os.Stat(sub)
			if err != nil || !st.IsDir() {
				continue
			}
		}
		s, ps := load(sub, name)
		probs = append(probs, ps...)
		if s != nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, SortProblems(probs)
}

// load reads one skill folder.
func load(dir, folder string) (*Skill, []Problem) {
	rel := folder + "/" + FileName
	data, err := readSkillFile(filepath.Join(dir, FileName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			msg := "skill folder has no " + FileName
			if _, serr := os.Stat(filepath.Join(dir, "skill.md")); serr == nil {
				msg += " (found skill.md: the file name is upper case)"
			}
			return nil, []Problem{{File: folder, Msg: msg}}
		}
		return nil, []Problem{{File: rel, Msg: unwrapPath(err).Error()}}
	}
	s, probs := parseSkill(rel, data, folder)
	if s != nil {
		s.Dir = dir
	}
	return s, probs
}

func readSkillFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", FileName)
	}
	if st.Size() > maxSkillFile {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", FileName, st.Size(), maxSkillFile)
	}
	return os.ReadFile(path)
}

// Body reads the skill's instructions: SKILL.md without its front matter.
// It reads the file each time, so an edit shows at once (a skill held in
// memory has its own copy).
func (s *Skill) Body() (string, error) {
	var data []byte
	if s.files != nil {
		data = []byte(s.files[0].Content) // SKILL.md (Draft.Build)
	} else {
		var err error
		if data, err = readSkillFile(filepath.Join(s.Dir, FileName)); err != nil {
			return "", fmt.Errorf("skill %s: %w", s.Name, unwrapPath(err))
		}
	}
	_, body, _, err := splitFrontMatter(data)
	if err != nil {
		return "", fmt.Errorf("skill %s: front matter: %w", s.Name, err)
	}
	return strings.TrimLeft(string(body), "\r\n"), nil
}

// unwrapPath drops the host path from an fs.PathError, keeping op and cause.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
