#!/usr/bin/env bash
# azurite.sh: installs Azurite, Microsoft's Azure Storage emulator, from npm into
# the local tool cache and prints the path of its azurite-blob command. An
# installed version costs nothing. `make unit` runs it and hands the path to the
# ABS store tests as AZURITE_BLOB; it needs node and npm (apt-get install npm).
set -o errexit -o nounset -o pipefail

AZURITE_VERSION=${AZURITE_VERSION:-3.37.0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator-local/tools/azurite-$AZURITE_VERSION
bin=$cache/node_modules/.bin/azurite-blob

if [[ ! -x $bin ]]; then
	if ! command -v npm >/dev/null; then
		echo "azurite.sh: npm not found; install node and npm (apt-get install npm)" >&2
		exit 1
	fi
	mkdir -p "$cache"
	# --prefix keeps it out of the system and of the repo; a lock file pins the rest.
	npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >&2
fi
echo "$bin"
