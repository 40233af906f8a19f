#!/usr/bin/env bash
# The Debian packages the test suite drives for real (called by `make test`):
#   chromium  a real browser: `polc report` pages are opened and checked headless
#   neovim    a real LSP client: `polc lsp` is driven through it
#   libseccomp2  the analysis sandbox's seccomp filter (pyseccomp loads it; Debian's apt needs it too)
#   gcc       a C compiler: the C back end's output is built and run against JAX (tests/compiler/backend/test_emit_c.py)
# Installs only what is missing, and only where apt-get and root (or sudo) exist;
# elsewhere it says what to install and the tests that need them skip with that reason.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v nvim >/dev/null 2>&1 || need+=(neovim)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || need+=(libseccomp2)
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || need+=(gcc)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: no apt-get here; install ${need[*]} yourself (their tests skip without them)." >&2
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "system-deps: not root and no sudo; install ${need[*]} yourself (their tests skip without them)." >&2
        exit 0
    fi
fi
echo "system-deps: installing ${need[*]} (Debian packages, once)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
