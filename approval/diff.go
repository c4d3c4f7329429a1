package approval

import (
	"encoding/json"
	"fmt"
	"strings"
)

// maxDiff bounds a diff shown for approval; the input is there in full.
const maxDiff = 64 << 10

// Diff renders a file edit's input as a unified diff for a person to read:
// Edit (old_string to new_string, or the diff a CLI made of its change:
// Codex's), MultiEdit (each edit), Write (content, as lines added). Other
// tools have none ("").
func Diff(tool string, input json.RawMessage) string {
	var in struct {
		FilePath   string `json:"file_path"`
		Diff       string `json:"diff"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		Content    string `json:"content"`
		ReplaceAll bool   `json:"replace_all"`
		Edits      []struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		} `json:"edits"`
	}
	if json.Unmarshal(input, &in) != nil || in.FilePath == "" {
		return ""
	}
	var b strings.Builder
	switch tool {
	case "Edit":
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", in.FilePath, in.FilePath)
		if in.Diff != "" {
			b.WriteString(strings.TrimPrefix(in.Diff, "\n"))
			if !strings.HasSuffix(in.Diff, "\n") {
				b.WriteString("\n")
			}
			break
		}
		hunk(&b, in.OldString, in.NewString)
	case "MultiEdit":
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", in.FilePath, in.FilePath)
		for _, e := range in.Edits {
			hunk(&b, e.OldString, e.NewString)
		}
	case "Write":
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", in.FilePath, in.FilePath)
		hunk(&b, "", in.Content)
	default:
		return ""
	}
	s := b.String()
	if len(s) > maxDiff {
		s = strings.ToValidUTF8(s[:maxDiff], "") + "\n[diff truncated: the input holds all of it]\n"
	}
	return s
}

// hunk writes the change from old to new as one hunk: the lines both
// share at their start and end as context, the rest removed and added.
func hunk(b *strings.Builder, old, new string) {
	ol, nl := lines(old), lines(new)
	pre := 0
	for pre < len(ol) && pre < len(nl) && ol[pre] == nl[pre] {
		pre++
	}
	suf := 0
	for suf < len(ol)-pre && suf < len(nl)-pre && ol[len(ol)-1-suf] == nl[len(nl)-1-suf] {
		suf++
	}
	fmt.Fprintf(b, "@@ -1,%d +1,%d @@\n", len(ol), len(nl))
	for _, l := range ol[:pre] {
		b.WriteString(" " + l + "\n")
	}
	for _, l := range ol[pre : len(ol)-suf] {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range nl[pre : len(nl)-suf] {
		b.WriteString("+" + l + "\n")
	}
	for _, l := range ol[len(ol)-suf:] {
		b.WriteString(" " + l + "\n")
	}
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
