#!/usr/bin/env bash
# Build the VS Code extension reproducibly from editors/vscode/package-lock.json:
# install the pinned packages, compile the TypeScript, run its unit tests, package a .vsix.
#
#   editors/build.sh            -> editors/vscode/spanfill-<version>.vsix
#
# Needs Node >= 20 and npm. With a warm npm cache (~/.npm) no network is used.
set -euo pipefail
cd "$(dirname "$0")/vscode"

major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
    echo "editors/build.sh: Node >= 20 is needed (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi

npm ci --prefer-offline --no-audit --no-fund
npm run compile
npm test
npm run package
ls -l ./*.vsix
