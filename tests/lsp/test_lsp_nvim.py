"""Neovim as a real LSP client of `polc lsp`: headless, with the shipped plugin
(editors/nvim), it opens a broken .pol file, waits for the diagnostics and
writes them to a file this test reads and compares with `polc check`'s.

Without nvim (`make test` installs Debian's neovim: scripts/system-deps.sh) the
test skips locally and fails under CI, where its absence is a broken setup.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from polc import cli

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"

INIT = r"""
vim.opt.runtimepath:prepend(os.getenv("POLC_NVIM_PLUGIN"))
vim.cmd("filetype on")
require("polc").setup({ cmd = vim.fn.json_decode(os.getenv("POLC_LSP_CMD")) })
vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("POLC_NVIM_FILE")))
local got = vim.wait(45000, function() return #vim.diagnostic.get(0) > 0 end, 50)
local out = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = (d.user_data or {}).lsp or {}
  table.insert(out, { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message,
                      code = d.code or lsp.code, filetype = vim.bo.filetype })
end
local f = io.open(os.getenv("POLC_NVIM_OUT"), "w")
f:write(vim.fn.json_encode({ waited = got, diagnostics = out }))
f:close()
vim.cmd("qa!")
"""

BROKEN = """policy broken "a typo and a refuted intent"
obs slip : real in [0, 1]
weight k : real >= 0 = 0.5
latent target = 1 - k * sllip
action gas : real in [0, 1] = clip(target, 0, 1)
"""


def nvim() -> str:
    exe = shutil.which("nvim")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("nvim is missing on CI: scripts/system-deps.sh (make test) installs Debian's neovim")
        pytest.skip("nvim is not installed (Debian: apt-get install neovim; `make test` does it)")
    return exe


def test_neovim_shows_polc_checks_diagnostics(tmp_path):
    exe = nvim()
    bad = tmp_path / "broken.pol"
    bad.write_text(BROKEN, encoding="utf-8")
    (tmp_path / "init.lua").write_text(INIT, encoding="utf-8")
    out = tmp_path / "diagnostics.json"
    polc = Path(sys.executable).with_name("polc")
    cmd = [str(polc), "lsp"] if polc.exists() else [sys.executable, "-m", "polc.cli", "lsp"]
    env = dict(os.environ, POLC_NVIM_PLUGIN=str(PLUGIN), POLC_LSP_CMD=json.dumps(cmd),
               POLC_NVIM_FILE=str(bad), POLC_NVIM_OUT=str(out), XDG_CONFIG_HOME=str(tmp_path),
               XDG_DATA_HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path))
    subprocess.run([exe, "--headless", "--clean", "-n", "-u", str(tmp_path / "init.lua")], env=env,
                   cwd=tmp_path, timeout=90, stdin=subprocess.DEVNULL, capture_output=True, check=True)
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["waited"] is True
    text = io.StringIO()
    with redirect_stdout(text):
        cli.main(["check", "--verbose", "--format", "json", str(bad)])
    expected = json.loads(text.getvalue())
    assert expected and expected[0]["code"] == "E0101"
    seen = [(d["code"], d["lnum"] + 1, d["col"] + 1, d["severity"], d["message"].split("\nHint: ")[0])
            for d in got["diagnostics"]]
    severity = {"error": 1, "warning": 2, "note": 3}
    assert seen == [(d["code"], d["span"]["line"], d["span"]["column"], severity[d["severity"]], d["message"])
                    for d in expected]
    assert got["diagnostics"][0]["filetype"] == "pol"  # the plugin's ftdetect named the buffer's filetype
