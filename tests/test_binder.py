"""The Binder launch button's environment (repo2docker reads binder/):
the same pins as requirements.txt, PyTorch's CPU build, and the course package."""

import os
import re
from pathlib import Path

from autograder.chapters import ROOT

BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def pins(path: Path) -> tuple[dict[str, str], list[str]]:
    """{normalised name: version} of a requirements file, and its option lines."""
    found, options = {}, []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
            continue
        m = PIN.match(line)
        assert m, f"{path.name}: not an exact pin: {line!r}"
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        assert name not in found, f"{path.name}: {name} pinned twice"
        found[name] = m.group(2)
    return found, options


def test_binder_pins_the_same_versions_as_requirements_txt():
    want, _ = pins(ROOT / "requirements.txt")
    got, _ = pins(BINDER / "requirements.txt")
    assert sorted(got) == sorted(want), f"only in binder: {set(got) - set(want)}; missing: {set(want) - set(got)}"
    for name, version in want.items():
        assert got[name].split("+")[0] == version, f"{name}: binder {got[name]}, requirements.txt {version}"
        if name != "torch":
            assert got[name] == version, name


def test_binder_installs_the_cpu_build_of_torch():
    got, options = pins(BINDER / "requirements.txt")
    assert got["torch"].endswith("+cpu"), "PyPI's torch is the CUDA build: gigabytes on every Binder launch"
    assert f"--extra-index-url {CPU_INDEX}" in options or f"--index-url {CPU_INDEX}" in options


def test_binder_python_satisfies_the_package_and_installs_it():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-3\.(\d+)", runtime)
    assert m, runtime
    needed = re.search(r'^requires-python = ">=3\.(\d+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert needed and int(m.group(1)) >= int(needed.group(1))
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "repo2docker runs postBuild only when it is executable"
    commands = [ln for ln in post.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert any(re.search(r"pip install .*--no-deps.* \.$", ln) for ln in commands), commands
