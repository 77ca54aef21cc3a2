"""Fixtures of the attune Python package's tests.

The tests run against a real ``attune serve`` on loopback, started once per session with
two tenants. The ``attune`` program is ``$ATTUNE_BIN`` (CTest sets it), else the build
tree's ``build/tools/attune/attune``, else ``attune`` on ``PATH``; without one, the tests
that need it are skipped with a message (the others still run).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
SOURCE_ROOT = PYTHON_DIR.parent
SAMPLE = SOURCE_ROOT / "data" / "sample"

# The package in place (python/attune), ahead of any installed copy.
sys.path.insert(0, str(PYTHON_DIR))

import attune  # noqa: E402


def _binary() -> Optional[str]:
    env = os.environ.get("ATTUNE_BIN")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    built = SOURCE_ROOT / "build" / "tools" / "attune" / "attune"
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    return shutil.which("attune")


@pytest.fixture(scope="session")
def attune_bin() -> str:
    """The attune program, or a skip naming where it was looked for."""
    found = _binary()
    if found is None:
        where = f"ATTUNE_BIN={os.environ['ATTUNE_BIN']} is not an executable" if os.environ.get("ATTUNE_BIN") else \
            "no ATTUNE_BIN, no build/tools/attune/attune, no attune on PATH"
        pytest.skip(f"attune binary not found ({where}): build it (bash scripts/setup.sh) or set ATTUNE_BIN")
    return found


@pytest.fixture(scope="session")
def sample() -> Path:
    """The bundled sample dataset (data/sample), or a skip."""
    if not (SAMPLE / "commit_subject" / "dev_questions.json").exists():
        pytest.skip(f"{SAMPLE}: the bundled sample data is missing")
    return SAMPLE


@pytest.fixture()
def cli(attune_bin: str, tmp_path: Path) -> attune.Attune:
    """An Attune runner working in a fresh folder with its own store."""
    return attune.Attune(attune_bin, store=tmp_path / "cli.db", cwd=tmp_path, timeout=120)


class Served(NamedTuple):
    server: attune.Server
    runner: attune.Attune
    store: Path
    key: str  # tenant "acme"
    other_key: str  # tenant "globex"


@pytest.fixture(scope="session")
def served(attune_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``attune serve`` on a free loopback port, with tenants acme and globex; stopped at the end."""
    work = tmp_path_factory.mktemp("serve")
    store = work / "serve.db"
    runner = attune.Attune(attune_bin, store=store, cwd=work, timeout=60)
    key = runner.tenant_add("acme")
    other = runner.tenant_add("globex")
    server = runner.serve()
    try:
        yield Served(server, runner, store, key, other)
    finally:
        log = server.stop()
        assert "stopped" in log or log == "", log


@pytest.fixture()
def client(served: Served) -> attune.Client:
    """A client of the session's server as tenant acme."""
    return served.server.client(served.key, timeout=10)
