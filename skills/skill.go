// Package skills handles Agent Skills (agentskills.io): discovering skill
// folders, validating SKILL.md front matter, and syncing skills into a
// workspace for a coding-agent CLI.
package skills

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
