# Shared helpers for the set-up scripts (sourced, not run).

# Pinned versions of what the sandbox image and the host tests use.
CLAUDE_VERSION="${CLAUDE_VERSION:-2.1.197}"
OPENAI_VERSION="${OPENAI_VERSION:-6.49.0}"
TYPESCRIPT_VERSION="${TYPESCRIPT_VERSION:-5.9.3}"

export DEBIAN_FRONTEND=noninteractive

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
