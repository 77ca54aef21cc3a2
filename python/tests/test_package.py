"""The package itself: its build backend (standard library only) and Python 3.9 syntax."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import importlib.util
import io
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

import attune
from conftest import PYTHON_DIR


def _backend() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attune_build", PYTHON_DIR / "_build" / "attune_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wheel(tmp_path: Path) -> None:
    backend = _backend()
    assert backend.get_requires_for_build_wheel() == []
    name = backend.build_wheel(str(tmp_path))
    assert name == f"attune_client-{attune.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as whl:
        names = set(whl.namelist())
        assert {"attune/__init__.py", "attune/client.py", "attune/cli.py", "attune/errors.py", "attune/py.typed"} <= names
        assert not any("__pycache__" in n or n.startswith("tests/") for n in names)
        dist = f"attune_client-{attune.__version__}.dist-info"
        meta = whl.read(f"{dist}/METADATA").decode()
        assert f"Version: {attune.__version__}\n" in meta and "Name: attune-client\n" in meta
        assert "Requires-Python: >=3.9\n" in meta
        rows = list(csv.reader(io.StringIO(whl.read(f"{dist}/RECORD").decode())))
        assert {r[0] for r in rows} == names
        for path, digest, size in rows:
            if path.endswith("RECORD"):
                assert digest == size == ""
                continue
            data = whl.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={want}", len(data))


def test_editable_wheel_and_sdist(tmp_path: Path) -> None:
    backend = _backend()
    with zipfile.ZipFile(tmp_path / backend.build_editable(str(tmp_path))) as whl:
        assert whl.read("attune_client.pth").decode().strip() == str(PYTHON_DIR)
    with tarfile.open(tmp_path / backend.build_sdist(str(tmp_path))) as sdist:
        top = f"attune_client-{attune.__version__}"
        names = set(sdist.getnames())
        assert {f"{top}/pyproject.toml", f"{top}/PKG-INFO", f"{top}/_build/attune_build.py", f"{top}/attune/client.py"} <= names


def test_pyproject_agrees_with_tomllib() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(PYTHON_DIR / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    meta = _backend()._project()
    for key in ("name", "description", "requires-python"):
        assert meta[key] == project["project"][key]
    assert project["build-system"] == {"requires": [], "build-backend": "attune_build", "backend-path": ["_build"]}


def test_sources_parse_as_python_3_9() -> None:
    files = sorted((PYTHON_DIR / "attune").glob("*.py")) + [PYTHON_DIR / "_build" / "attune_build.py"]
    for f in files:
        ast.parse(f.read_text(encoding="utf-8"), filename=str(f), feature_version=(3, 9))
    assert sys.version_info >= (3, 9)
