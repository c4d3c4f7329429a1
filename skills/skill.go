// Package skills handles Agent Skills (agentskills.io): discovering skill
// folders, validating SKILL.md front matter, and syncing skills into a
// workspace for a coding-agent CLI.
package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Skill is one discovered skill. Discovery loads only the front matter
// (progressive disclosure); Body reads the instructions on demand.
type Skill struct {
	// Name equals the skill's folder name.
	Name          string            `yaml:"name" json:"name"`
	Description   string            `yaml:"description" json:"description"`
	License       string            `yaml:"license,omitempty" json:"license,omitempty"`
	Compatibility string            `yaml:"compatibility,omitempty" json:"compatibility,omitempty"`
	Metadata      map[string]string `yaml:"metadata,omitempty" json:"metadata,omitempty"`
	AllowedTools  string            `yaml:"allowed-tools,omitempty" json:"allowed_tools,omitempty"`
	// Dir is the skill folder's absolute path; "" for a skill held in
	// memory (Draft.Build), whose files are in files.
	Dir string `yaml:"-" json:"-"`

	files []File
}

// Fingerprint identifies what installing s writes: its name and
// description with its folder, or, for a skill held in memory, with every
// file's path and content. Two skills with the same fingerprint install
// the same files (a folder's content is the app's, which a reload
// replaces).
func (s *Skill) Fingerprint() string {
	h := sha256.New()
	for _, f := range append([]File{{Path: s.Name, Content: s.Description}, {Path: s.Dir}}, s.files...) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(f.Path), f.Path, len(f.Content), f.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}
