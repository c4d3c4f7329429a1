#!/usr/bin/env bash
# Fail when product code imports test code. Test code is a package named
# for it (its last path element ends in "test", such as sandboxtest and
# clitest, or is testenv) or one under test/; the product is every other
# package, whose non-test files must import none of them. When the product
# needs something a test package has (the scripted model), it becomes a
# product package with a product name.
set -euo pipefail

go=${GO:-go}
module=$($go list -m)
testpkg() {
	case "$1" in
	"$module"/test/* | */testenv | *test) return 0 ;;
	esac
	return 1
}

bad=0
while read -r pkg imports; do
	testpkg "$pkg" && continue
	for imp in $imports; do
		case "$imp" in "$module"/*) ;; *) continue ;; esac
		if testpkg "$imp"; then
			echo "error: product package $pkg imports test package $imp" >&2
			bad=1
		fi
	done
done < <($go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
exit $bad
