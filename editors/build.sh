#!/usr/bin/env bash
# Build the VS Code extension reproducibly from editors/vscode/package-lock.json:
# install the pinned packages, compile the TypeScript, run its unit tests, package a .vsix.
#
#   editors/build.sh            -> editors/vscode/spanfill-<version>.vsix
#
# Needs Node >= 20 and npm. With a warm npm cache (~/.npm) no network is used.
# When <repo>/.venv/bin/spanfill exists (after `make install`), the unit tests include a contract
# test against the real server (src/test/server.test.ts); SPANFILL_SERVER overrides the path.
set -euo pipefail
cd "$(dirname "$0")/vscode"
if [ -z "${SPANFILL_SERVER:-}" ] && [ -x ../../.venv/bin/spanfill ]; then
    SPANFILL_SERVER="$(cd ../.. && pwd)/.venv/bin/spanfill"
    export SPANFILL_SERVER
fi

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
