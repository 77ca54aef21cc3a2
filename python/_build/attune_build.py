"""The PEP 517 / PEP 660 build backend of attune's Python package, standard library only.

Why not setuptools: pip builds a package in an isolated environment and installs the
backend there first, from the network. attune is meant to install on machines without one,
so its backend needs nothing outside the standard library: ``pip install ./python`` works
offline with no flags (``[build-system] requires = []`` in pyproject.toml).

It writes a pure-Python wheel of the ``attune`` package (``build_wheel``), an editable
wheel whose ``.pth`` file points at this folder (``build_editable``, for ``pip install -e``)
and a source archive (``build_sdist``). The metadata comes from pyproject.toml's
``[project]`` table (plain ``key = "string"`` lines, read without a TOML library so that
Python 3.9 and 3.10 need nothing either) and the version from ``attune/__init__.py``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "attune"
TAG = "py3-none-any"
# Zip entries need a date from 1980 on; SOURCE_DATE_EPOCH makes the archives reproducible.
_EPOCH = max(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())), 315532800)


def _project() -> Dict[str, str]:
    """The string keys of pyproject.toml's ``[project]`` table, and the package's version."""
    meta: Dict[str, str] = {}
    section = None
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[] ")
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"\s*(#.*)?$', line)
            if section == "project" and m:
                meta[m.group(1)] = m.group(2)
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError(f"{PACKAGE}/__init__.py: no __version__ = \"...\" line")
    meta["version"] = m.group(1)
    for key in ("name", "description", "requires-python"):
        if key not in meta:
            raise RuntimeError(f"pyproject.toml: [project] has no {key} = \"...\"")
    return meta


def _dist_name(meta: Dict[str, str]) -> str:
    return re.sub(r"[-_.]+", "_", meta["name"]).lower() + "-" + meta["version"]


def _metadata(meta: Dict[str, str]) -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
        f"Summary: {meta['description']}",
        f"Requires-Python: {meta['requires-python']}",
    ]
    if "license" in meta:
        lines.append(f"License: {meta['license']}")
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _package_files() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of every file of the package, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


class _Wheel:
    """A wheel being written: every entry hashed into RECORD."""

    def __init__(self, path: str, dist: str) -> None:
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.dist_info = dist + ".dist-info"
        self.records: List[str] = []

    def add(self, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, time.gmtime(_EPOCH)[:6])
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self.records.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, meta: Dict[str, str]) -> None:
        self.add(f"{self.dist_info}/METADATA", _metadata(meta))
        wheel = f"Wheel-Version: 1.0\nGenerator: attune_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"
        self.add(f"{self.dist_info}/WHEEL", wheel.encode("utf-8"))
        self.add(f"{self.dist_info}/top_level.txt", (PACKAGE + "\n").encode("utf-8"))
        record = f"{self.dist_info}/RECORD"
        text = "\n".join(self.records + [f"{record},,"]) + "\n"
        info = zipfile.ZipInfo(record, time.gmtime(_EPOCH)[:6])
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, text.encode("utf-8"))
        self.zip.close()


def _build(wheel_directory: str, editable: bool) -> str:
    meta = _project()
    dist = _dist_name(meta)
    name = f"{dist}-{TAG}.whl"
    wheel = _Wheel(os.path.join(wheel_directory, name), dist)
    try:
        if editable:
            # A .pth line is a folder Python adds to sys.path: this one, which holds attune/.
            wheel.add(f"{dist.split('-')[0]}.pth", (ROOT + "\n").encode("utf-8"))
        else:
            for arcname, full in _package_files():
                with open(full, "rb") as f:
                    wheel.add(arcname, f.read())
    finally:
        wheel.close(meta)
    return name


# --- PEP 517 ---------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the standard library builds the wheel."""
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the standard library builds the archive."""
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the standard library builds the editable wheel."""
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """Writes ``attune_client-VERSION-py3-none-any.whl`` into ``wheel_directory``."""
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a wheel that installs a ``.pth`` file pointing at this source folder."""
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """Writes ``attune_client-VERSION.tar.gz``: the package, its tests, this backend, the docs."""
    meta = _project()
    dist = _dist_name(meta)
    name = dist + ".tar.gz"
    files: List[Tuple[str, str]] = []
    for top in ("pyproject.toml", "README.md"):
        if os.path.exists(os.path.join(ROOT, top)):
            files.append((top, os.path.join(ROOT, top)))
    for sub in (PACKAGE, "tests", "_build"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, sub)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".pytest_cache"))
            for fname in sorted(filenames):
                if not fname.endswith((".pyc", ".pyo")):
                    full = os.path.join(dirpath, fname)
                    files.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add_bytes(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{dist}/{arcname}")
            info.size, info.mtime, info.mode = len(data), _EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))

        add_bytes("PKG-INFO", _metadata(meta))
        for arcname, full in files:
            with open(full, "rb") as f:
                add_bytes(arcname, f.read())
    return name
