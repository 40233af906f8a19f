"""The import names map to the top-level folders, for editable and wheel installs alike."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_editable_install_maps_the_folders():
    import polc
    import polc.grammar
    import polc.runtime

    assert os.path.dirname(polc.__file__) == os.path.join(ROOT, "compiler")
    assert os.path.dirname(polc.runtime.__file__) == os.path.join(ROOT, "runtime")
    assert os.path.dirname(polc.grammar.__file__) == os.path.join(ROOT, "grammar")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the checkout: setuptools writes build/ and polc.egg-info where it
    # builds, and the checkout is what every other test (and worker) is reading meanwhile.
    src = tmp_path_factory.mktemp("src") / "polc"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", ".hypothesis",
                                                             ".pytest_cache", "__pycache__", "out", "runs"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    (path,) = out.glob("polc-*.whl")
    return path


def test_wheel_contains_packages_and_grammar(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "polc/__init__.py" in names
    assert "polc/check/program.py" in names
    assert "polc/grammar/pol.lark" in names
    assert "polc/runtime/__init__.py" in names
    assert not any(n.startswith(("compiler/", "runtime/", "grammar/", "tests/")) for n in names)
    # Every package folder of the source tree is in the wheel (the package list is explicit).
    for folder, name in (("compiler", "polc"), ("runtime", "polc/runtime"), ("grammar", "polc/grammar")):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "__init__.py" in files and "__pycache__" not in dirpath:
                rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
                init = os.path.normpath(os.path.join(name, rel, "__init__.py")).replace(os.sep, "/")
                assert init in names, f"{init} is missing from the wheel: add it to [tool.setuptools] packages"


def test_wheel_imports_and_checks_a_program(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True)
    # The wheel's copy comes first on sys.path, ahead of the editable finder.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import polc, polc.runtime;"
        "assert polc.__file__.startswith(sys.argv[1]), polc.__file__;"
        "assert polc.runtime.__file__.startswith(sys.argv[1]);"
        "p = polc.loads(open(sys.argv[2]).read(), 'initial.pol', analyze=False);"
        "print(p.name, len(p.typed.nodes))"
    )
    example = os.path.join(ROOT, "examples", "car_racing", "initial.pol")
    r = subprocess.run([sys.executable, "-c", code, str(target), example], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    name, nodes = r.stdout.split()
    assert name == "car_racing" and int(nodes) > 5
