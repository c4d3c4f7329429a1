# Shared helpers for the set-up scripts (sourced, not run).

# Pinned versions of what the sandbox image and the host tests use.
CLAUDE_VERSION="${CLAUDE_VERSION:-2.1.197}"
OPENAI_VERSION="${OPENAI_VERSION:-6.49.0}"
TYPESCRIPT_VERSION="${TYPESCRIPT_VERSION:-5.9.3}"

export DEBIAN_FRONTEND=noninteractive

# AGENTBOX_CACHE holds what is big and slow to build (npm installs, the
# debootstrap root filesystem), outside the clone, keyed by its inputs, so a
# fresh clone (CI's) or a second worktree reuses it. The clone's .cache only
# links into it.
AGENTBOX_CACHE="${AGENTBOX_CACHE:-${HOME:-/root}/.cache/agentbox}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# as_root runs a command as root (directly, or through sudo when present).
as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -E "$@"
	else
		die "need root to run: $* (run as root or install sudo)"
	fi
}

apt_updated=""
# apt_install installs Debian packages non-interactively, updating the
# package lists once per run.
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* by hand (this set-up targets Debian)"
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		as_root apt-get update -qq
		apt_updated=1
	fi
	log "apt-get install $*"
	as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# claude_platform is the npm platform package suffix for this machine.
claude_platform() {
	case "$(uname -m)" in
	x86_64 | amd64) echo linux-x64 ;;
	aarch64 | arm64) echo linux-arm64 ;;
	*) die "no Claude Code CLI build for $(uname -m)" ;;
	esac
}

# with_lock NAME CMD... runs CMD while holding an exclusive lock on
# $AGENTBOX_CACHE/NAME.lock, so two set-ups (two clones, parallel make
# runs) never build the same cached thing at once.
with_lock() {
	local name=$1
	shift
	mkdir -p "$AGENTBOX_CACHE"
	if command -v flock >/dev/null 2>&1; then
		(
			flock 9
			"$@"
		) 9>"$AGENTBOX_CACHE/$name.lock"
	else
		"$@"
	fi
}

# key_of prints a short hash of its arguments: cache folder names.
key_of() { printf '%s' "$*" | sha256sum | cut -c1-12; }
