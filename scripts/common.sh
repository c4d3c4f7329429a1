# Shared helpers for the set-up scripts (sourced, not run).

# Pinned versions of every CLI and tool (one place: scripts/versions.sh).
. "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

# The supported Claude Code versions, the pinned one first.
claude_versions() {
	if [ "$CLAUDE_LATEST_VERSION" = "$CLAUDE_VERSION" ]; then
		echo "$CLAUDE_VERSION"
	else
		echo "$CLAUDE_VERSION $CLAUDE_LATEST_VERSION"
	fi
}

# Images are named PREFIX/sandbox-NAME:TAG; the product's defaults use the
# prefix agentbox. Another prefix builds a separate set (a development
# build that must not replace the images other test runs use).
AGENTBOX_IMAGE_PREFIX="${AGENTBOX_IMAGE_PREFIX:-agentbox}"

export DEBIAN_FRONTEND=noninteractive

# AGENTBOX_CACHE holds what is big and slow to build (npm installs, the
# debootstrap root filesystem), outside the clone, keyed by its inputs, so a
# fresh clone (CI's) or a second worktree reuses it. The clone's .cache only
# links into it.
AGENTBOX_CACHE="${AGENTBOX_CACHE:-${HOME:-/root}/.cache/agentbox}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

case "$AGENTBOX_IMAGE_PREFIX" in
"" | /* | */ | *//* | *[!a-z0-9._/-]*)
	die "AGENTBOX_IMAGE_PREFIX=$AGENTBOX_IMAGE_PREFIX is not an image repository prefix (want lower-case letters, digits, '.', '_', '-' and '/', like agentbox or agentbox-dev)" ;;
esac

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

# image_name NAME [TAG] prints PREFIX/sandbox-NAME:TAG (TAG: latest).
image_name() { printf '%s/sandbox-%s:%s\n' "$AGENTBOX_IMAGE_PREFIX" "$1" "${2:-latest}"; }

# Architecture names of this machine, as each distribution spells them:
# npm_platform (node-linux-*, claude-code-linux-*), go_arch (the Go
# toolchain), codex_triple (@openai/codex's vendor folder) and
# opencode_package (opencode-ai's native package; the x64 "baseline" build
# runs on CPUs without AVX2 too, so an image runs on any x64 machine).
npm_platform() {
	case "$(uname -m)" in
	x86_64 | amd64) echo linux-x64 ;;
	aarch64 | arm64) echo linux-arm64 ;;
	*) die "no Node.js or coding-agent CLI builds for $(uname -m) (x86_64 and aarch64 are supported)" ;;
	esac
}
go_arch() { case "$(npm_platform)" in linux-x64) echo amd64 ;; linux-arm64) echo arm64 ;; esac; }
codex_triple() { case "$(npm_platform)" in linux-x64) echo x86_64-unknown-linux-musl ;; linux-arm64) echo aarch64-unknown-linux-musl ;; esac; }
opencode_package() { case "$(npm_platform)" in linux-x64) echo opencode-linux-x64-baseline ;; linux-arm64) echo opencode-linux-arm64 ;; esac; }

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
