// Package images names the sandbox images: the ones `make image` builds
// offline (scripts/build-image.sh) and images/*/Dockerfile build from a
// registry, and the default image of each sandbox command. The versions in
// them are pinned in scripts/versions.sh; the package's tests run the
// design's quick check and each CLI's --version inside every image.
//
// Every image is PREFIX/sandbox-NAME:TAG. The product uses the prefix
// agentbox; a build with AGENTBOX_IMAGE_PREFIX set makes a separate set
// under another prefix (what a development build uses so as not to replace
// the images other test runs use).
package images

// Prefix is the repository prefix of the product's images.
const Prefix = "agentbox"

// The product's images. Each runs as the user agent (uid/gid 1000, home
// /home/agent) in /workspace, with tini as entrypoint, on Debian bookworm
// with python3, Node.js 22, git, curl, vim, zip, unzip, procps, less and
// tree.
const (
	// Base has no coding-agent CLI: the image others build on.
	Base = Prefix + "/sandbox-base:latest"
	// BaseFull is Base with Go.
	BaseFull = Prefix + "/sandbox-base-full:latest"
	// Claude has the pinned Claude Code CLI; PREFIX/sandbox-claude:VERSION
	// has each supported version (Name("", "claude", version)).
	Claude = Prefix + "/sandbox-claude:latest"
	// ClaudeFull is BaseFull with the pinned Claude Code CLI.
	ClaudeFull = Prefix + "/sandbox-claude-full:latest"
	// Codex has the Codex CLI (@openai/codex).
	Codex = Prefix + "/sandbox-codex:latest"
	// Gemini has the Gemini CLI (@google/gemini-cli).
	Gemini = Prefix + "/sandbox-gemini:latest"
	// Opencode has opencode (opencode-ai).
	Opencode = Prefix + "/sandbox-opencode:latest"
	// Desktop has the pinned Claude Code CLI and a desktop (Xvfb, openbox,
	// Chromium, x11vnc, noVNC; package desktop starts it).
	Desktop = Prefix + "/sandbox-desktop:latest"
	// Cursor has the Cursor CLI; images/cursor/build.sh builds it where
	// Cursor's distribution is reachable (it is not on npm).
	Cursor = Prefix + "/sandbox-cursor:latest"
)

// byCommand maps each sandbox command to its default image. It holds the
// commands to come as well: an executor registers its command elsewhere
// (assistant, pipeline); this only names the image.
var byCommand = map[string]string{
	"claude":   Claude,
	"codex":    Codex,
	"cursor":   Cursor,
	"gemini":   Gemini,
	"opencode": Opencode,
}

// ForCommand returns the default image of a sandbox command, or "" for a
// command without one.
func ForCommand(command string) string { return byCommand[command] }

// Name returns PREFIX/sandbox-NAME:TAG, with the product's prefix when
// prefix is "" and the tag latest when tag is "".
func Name(prefix, name, tag string) string {
	if prefix == "" {
		prefix = Prefix
	}
	if tag == "" {
		tag = "latest"
	}
	return prefix + "/sandbox-" + name + ":" + tag
}
