#!/usr/bin/env bash
# version.sh: prints the version the build stamps into the binaries, the image
# and the chart, from git:
#   on a tag                  v0.2.0
#   commits after a tag       v0.2.0-3-g1a2b3c4   (git describe)
#   no tag yet                v0.0.0-g1a2b3c4     (so that it sorts before any release)
#   uncommitted changes       ...-dirty
#   no git (a source archive) v0.0.0-unknown
# `make VERSION=...` overrides it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! described=$(git describe --tags --always --dirty 2>/dev/null); then
	echo v0.0.0-unknown
	exit 0
fi
# Without a tag, describe --always gives the abbreviated commit alone, which
# no tool reads as a version.
if ! git describe --tags --abbrev=0 >/dev/null 2>&1; then
	described=v0.0.0-g$described
fi
echo "$described"
