#!/usr/bin/env bash
# Package this folder as a .vsix (needs node and npm; fetches vscode-languageclient and
# @vscode/vsce from the npm registry the first time):
#   bash editors/vscode/build-vsix.sh        -> editors/vscode/polc-pol-0.1.0.vsix
#   code --install-extension editors/vscode/polc-pol-0.1.0.vsix
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund --silent
npx --yes @vscode/vsce@4.1.0 package --allow-missing-repository --skip-license
