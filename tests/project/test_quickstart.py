"""`make compile-demo` (examples/quickstart.py) runs end to end and writes what it says."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_checks_compiles_runs_and_writes(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("quickstart", os.path.join(ROOT, "examples", "quickstart.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "intent 'target_speed decreasing in slip': proved" in out
    for name in ("steer", "gas", "brake", "target_speed", "slip", "steer_cmd"):
        assert f"  {name} " in out
    svg = (tmp_path / "initial.svg").read_text()
    assert svg.startswith("<svg") or svg.startswith("<?xml")
    assert "def apply(" in (tmp_path / "initial_policy.py").read_text()
