#!/usr/bin/env bash
# Installs the e2e tests' npm packages (package-lock.json, `npm ci`) and compiles the TypeScript
# sources (tsc, strict) into DEST, outside the source tree. Usage: npm_setup.sh DEST
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
dest="$1"
mkdir -p "$dest"
# npm ci only when the lock file changed: it wipes and refetches node_modules.
if ! cmp -s "$src/package-lock.json" "$dest/package-lock.json" || [ ! -d "$dest/node_modules" ]; then
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
fi
rm -rf "$dest/src" "$dest/dist"
cp -r "$src/src" "$src/tsconfig.json" "$dest/"
(cd "$dest" && ./node_modules/.bin/tsc -p .)
echo "e2e node setup ok in $dest"
