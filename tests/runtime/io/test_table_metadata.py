"""A trace whose polc metadata is JSON but not what polc writes (a string where an object
belongs, numbers where text belongs): `polc analyze` says so, or ignores what it cannot
use, and never fails with an internal error."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


@pytest.fixture
def trace(tmp_path, pol, capsys):
    path = tmp_path / "trace.parquet"
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "1", "-o", str(path), "-q")
    assert code == 0, err
    return path


def with_metadata(path, out, edit) -> str:
    table = pq.read_table(str(path))
    meta = json.loads(table.schema.metadata[b"polc"])
    edit(meta)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"polc": json.dumps(meta).encode()}),
                   str(out))
    return str(out)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(policy="reach"), 'its polc metadata\'s "policy" is not an object with the policy\'s source'),
    (lambda m: m["policy"].update(source=5), 'its polc metadata\'s "policy" is not an object'),
    (lambda m: m.pop("policy"), "does not record its policy's source; give it with --policy P.pol"),
])
def test_analyze_without_policy_names_what_the_metadata_lacks(trace, tmp_path, capsys, edit, message):
    bad = with_metadata(trace, tmp_path / "bad.parquet", edit)
    code, _, err = polc(capsys, "analyze", bad)
    assert code == 1 and message in err, err


@pytest.mark.parametrize("edit", [lambda m: m.update(policy="reach"),
                                  lambda m: m["policy"].update(structure_sha256=5, name=[1])])
def test_analyze_with_policy_ignores_a_malformed_recorded_policy(trace, tmp_path, capsys, pol, edit):
    bad = with_metadata(trace, tmp_path / "bad.parquet", edit)
    code, out, err = polc(capsys, "analyze", bad, "--policy", pol)
    assert code == 0 and "Diagnostics of policy reach" in out, err
