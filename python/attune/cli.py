"""Thin wrappers around the ``attune`` command line (docs/cli.md).

Each wrapper runs one verb in a subprocess and returns what the verb writes as parsed
JSON, so a notebook can drive an experiment::

    from attune import Attune

    a = Attune(store="exp.db")                    # the binary: ATTUNE_BIN, else PATH
    report = a.eval("commit_subject", ["none", "bm25"], data="data/sample", llm="reference")
    report["results"]["bm25"]["rouge-1"]

The models run in the ``attune`` process, never in Python's: this package imports no torch
and loads no native library, so it can sit next to any other library a notebook uses.

A verb that fails raises :class:`attune.errors.CliError` with its exit status and its
error line (attune exits 2 on a usage error, 1 on a runtime error).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union, cast

from .client import Client
from .errors import BinaryNotFound, CliError

__all__ = [
    "Attune",
    "Report",
    "Server",
    "find_binary",
    "train_metadata",
]

PathLike = Union[str, "os.PathLike[str]"]


def find_binary(binary: Optional[PathLike] = None) -> str:
    """The ``attune`` program to run: ``binary`` if given, else ``$ATTUNE_BIN``, else ``attune`` on ``PATH``.

    Raises:
        BinaryNotFound: none of them names an executable file.
    """
    tried: List[str] = []
    for source, candidate in (("binary", binary), ("ATTUNE_BIN", os.environ.get("ATTUNE_BIN"))):
        if candidate:
            path = os.fspath(candidate)
            found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
            if found and os.path.isfile(found):
                return os.path.abspath(found)
            raise BinaryNotFound(f"{source} = {path}: not an executable file")
        tried.append(f"{source} not set")
    found = shutil.which("attune")
    if found:
        return os.path.abspath(found)
    tried.append("no attune on PATH")
    raise BinaryNotFound("attune binary not found (" + "; ".join(tried) +
                         "): pass Attune(binary=...) or set ATTUNE_BIN=build/tools/attune/attune")


def train_metadata(directory: PathLike) -> Dict[str, Any]:
    """The JSON metadata of a folder attune wrote (``train``, ``pretrain-encoder``, ``train-lm``...).

    Reads every ``attune_*.json`` in the folder, keyed by the rest of its name:
    ``"train"`` (``attune_train.json``: seed, data, options, per-epoch dev numbers, the kept
    epoch), ``"model"`` (``attune_model.json``: what kind of retriever the folder is, and how
    it reranks), ``"tokenizer"`` (``attune_tokenizer.json``). ``"dir"`` is the folder's path.

    Raises:
        FileNotFoundError: the folder does not exist or holds no ``attune_*.json``.
    """
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such folder")
    out: Dict[str, Any] = {}
    for f in sorted(path.glob("attune_*.json")):
        with open(f, encoding="utf-8") as fh:
            out[f.stem[len("attune_"):]] = json.load(fh)
    if not out:
        raise FileNotFoundError(f"{path}: no attune_*.json (not a folder attune trained)")
    out["dir"] = str(path)
    return out


class Report(dict):  # type: ignore[type-arg]
    """A verb's parsed JSON report (a plain ``dict``), with what the verb printed beside it.

    Attributes:
        stdout: the verb's standard output (``eval``: the results table).
        stderr: its standard error (progress lines, unless quiet).
    """

    stdout: str = ""
    stderr: str = ""


def _flag_value(value: Any) -> str:
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_flag_value(v) for v in value)
    return str(value)


def _flags(options: Mapping[str, Any]) -> List[str]:
    """Keyword arguments as long options: ``max_length=256`` -> ``--max-length 256``.

    ``True`` is a bare flag, ``None`` and ``False`` leave the option out, a list or tuple is
    comma-joined (``retrievers=["none", "bm25"]`` -> ``--retrievers none,bm25``).
    """
    out: List[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.rstrip("_").replace("_", "-")
        if value is True:
            out.append(flag)
        else:
            out += [flag, _flag_value(value)]
    return out


class Server:
    """A running ``attune serve`` (see :meth:`Attune.serve`); a context manager that stops it.

    Attributes:
        url: ``http://HOST:PORT``.
        port: the port it listens on.
        process: the ``subprocess.Popen`` of the server.
    """

    def __init__(self, process: "subprocess.Popen[bytes]", url: str, port: int, workdir: "tempfile.TemporaryDirectory[str]",
                 log: Path, args: List[str]) -> None:
        self.process = process
        self.url = url
        self.port = port
        self._workdir = workdir
        self._log = log
        self._args = args

    def client(self, api_key: Optional[str] = None, **kwargs: Any) -> Client:
        """A :class:`Client` of this server with ``api_key``."""
        return Client(self.url, api_key, **kwargs)

    @property
    def log(self) -> str:
        """What the server has written on stderr so far."""
        try:
            return self._log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def running(self) -> bool:
        """True while the server process is alive."""
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> str:
        """Stops the server with SIGTERM (it finishes the requests in flight), SIGKILL after
        ``timeout`` s; returns its stderr. Stopping a stopped server does nothing."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        log = self.log
        self._workdir.cleanup()
        return log

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server({self.url!r}, pid={self.process.pid}, {'running' if self.running() else 'stopped'})"


class Attune:
    """Runs ``attune`` verbs and returns their parsed output.

    Args:
        binary: the ``attune`` program; default ``$ATTUNE_BIN``, else ``attune`` on ``PATH``.
        store: the SQLite store for the verbs that take ``--store`` when a call gives none
            (attune's own default is ``./attune.db`` in ``cwd``).
        cwd: the folder the verbs run in (relative paths are read from there).
        env: variables added to the environment of every verb (e.g. ``{"OMP_NUM_THREADS": "2"}``).
        quiet: pass ``--quiet`` to the verbs that print progress (default True).
        timeout: seconds a verb may run before it is killed and CliError is raised (default: no limit).

    Raises:
        BinaryNotFound: no ``attune`` program was found.
    """

    def __init__(
        self,
        binary: Optional[PathLike] = None,
        *,
        store: Optional[PathLike] = None,
        cwd: Optional[PathLike] = None,
        env: Optional[Mapping[str, str]] = None,
        quiet: bool = True,
        timeout: Optional[float] = None,
    ) -> None:
        self.binary = find_binary(binary)
        self.store = os.fspath(store) if store is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.env = dict(env or {})
        self.quiet = quiet
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Attune({self.binary!r}, store={self.store!r})"

    # --- running -----------------------------------------------------------------------------

    def _environ(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        return env

    def run(
        self,
        *args: PathLike,
        check: bool = True,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> "subprocess.CompletedProcess[str]":
        """Runs ``attune ARGS --OPTION VALUE...`` and returns the finished process (text output).

        ``args`` are the verb and positional arguments (``"tenant", "add", "acme"``);
        ``options`` become long options (see the module docs). This is the escape hatch for a
        verb or an option no wrapper here names.

        Raises:
            CliError: the verb exited with a status other than 0 (unless ``check=False``), or
                ran past ``timeout``.
        """
        argv = [self.binary] + [os.fspath(a) for a in args] + _flags(options)
        verb = " ".join(os.fspath(a) for a in args[:2]) if args and os.fspath(args[0]) == "tenant" else (
            os.fspath(args[0]) if args else "")
        limit = timeout if timeout is not None else self.timeout
        try:
            proc = subprocess.run(argv, cwd=self.cwd, env=self._environ(), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                                  errors="replace", timeout=limit)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise CliError(argv, -int(signal.SIGKILL), err + f"\nattune: killed after {limit:g} s (timeout)",
                           verb=verb) from None
        if check and proc.returncode != 0:
            raise CliError(argv, proc.returncode, proc.stderr, verb=verb)
        return proc

    def _store(self, store: Optional[PathLike]) -> Optional[str]:
        return os.fspath(store) if store is not None else self.store

    def _quiet(self) -> Optional[bool]:
        return True if self.quiet else None

    # --- evaluation --------------------------------------------------------------------------

    def eval(
        self,
        task: str,
        retrievers: Union[str, Sequence[str]],
        *,
        data: Optional[PathLike] = None,
        split: Optional[str] = None,
        llm: str = "reference",
        k: Optional[int] = None,
        limit: Optional[int] = None,
        store: Optional[PathLike] = None,
        out: Optional[PathLike] = None,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> Report:
        """``attune eval``: retrieve, prompt, generate and score, one row per retriever.

        Args:
            task: ``commit_subject``, ``lamp3``, ``qa``...
            retrievers: specs, e.g. ``["none", "bm25", "rrf(bm25,recency)", "runs/kd"]``.
            data: the dataset folder (``--data``); or give ``questions=`` and ``outputs=``.
            split: ``train``, ``dev`` (attune's default) or ``test``.
            llm: the reader: ``reference``, ``local:DIR``, ``openai:URL#MODEL``...
            k: documents per prompt; limit: only the first N examples.
            store: the store (its generation cache makes a repeated run fast).
            out: also keep the JSON report in this file (for :meth:`report`).
            **options: any other ``eval`` option, e.g. ``max_length=256``, ``oracle=4``,
                ``list_overlap=True``, ``seed=1``.

        Returns:
            The JSON report of ``--out``: ``{"task", "split", "llm", "k", "seed", "examples",
            "results": {row: {metric: value}}, "per_example", "significance", ...}``;
            ``.stdout`` holds the printed table.
        """
        if not isinstance(retrievers, str):
            retrievers = ",".join(retrievers)
        with tempfile.TemporaryDirectory(prefix="attune-eval-") as tmp:
            path = os.fspath(self._path(out)) if out is not None else os.path.join(tmp, "eval.json")
            proc = self.run("eval", task=task, data=data, split=split, retrievers=retrievers, llm=llm, k=k, limit=limit,
                            store=self._store(store), quiet=self._quiet(), out=path, timeout=timeout, **options)
            with open(path, encoding="utf-8") as f:
                report = Report(json.load(f))
        report.stdout, report.stderr = proc.stdout, proc.stderr
        return report

    def rank(
        self,
        task: str,
        retriever: str = "bm25",
        *,
        data: Optional[PathLike] = None,
        split: Optional[str] = None,
        k: Optional[int] = None,
        store: Optional[PathLike] = None,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> List[Dict[str, Any]]:
        """``attune rank``: ranks each query's candidates with one retriever.

        Returns:
            One ``{"id", "ranking": [doc ids, best first], "scores": [...]}`` per query.
        """
        proc = self.run("rank", task=task, data=data, split=split, retriever=retriever, k=k, store=self._store(store),
                        quiet=self._quiet(), out="-", timeout=timeout, **options)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def metrics(
        self,
        task: str,
        predictions: Union[PathLike, Mapping[str, str], Iterable[Mapping[str, Any]]],
        golds: Union[PathLike, Mapping[str, str], Iterable[Mapping[str, Any]]],
        *,
        labels: Optional[Union[PathLike, Sequence[str]]] = None,
        timeout: Optional[float] = None,
    ) -> Dict[str, float]:
        """``attune metrics``: scores predictions against golds with the task's metrics.

        Args:
            predictions: a JSONL file of ``{"id", "output"}``, or the predictions themselves:
                ``{id: output}`` or a list of ``{"id", "output"}``.
            golds: a LaMP outputs file or a QA JSONL file, or the golds as for ``predictions``.
            labels: classification tasks: a JSON label list file, or the labels themselves.

        Returns:
            ``{metric: value}``, e.g. ``{"rouge-1": 0.41, "rouge-L": 0.39}``.
        """
        with tempfile.TemporaryDirectory(prefix="attune-metrics-") as tmp:
            pred_path = self._records_file(predictions, os.path.join(tmp, "predictions.jsonl"), jsonl=True, task=task)
            gold_path = self._records_file(golds, os.path.join(tmp, "golds.json"), jsonl=False, task=task)
            label_path: Optional[str] = None
            if labels is not None:
                if isinstance(labels, (str, os.PathLike)):
                    label_path = os.fspath(labels)
                else:
                    label_path = os.path.join(tmp, "labels.json")
                    with open(label_path, "w", encoding="utf-8") as f:
                        json.dump(list(labels), f)
            proc = self.run("metrics", task=task, predictions=pred_path, golds=gold_path, labels=label_path,
                            timeout=timeout)
        return cast(Dict[str, float], json.loads(proc.stdout))

    @staticmethod
    def _records_file(records: Any, path: str, *, jsonl: bool, task: str) -> str:
        """A file name given as is, or ``{"id", "output"}`` records written to ``path``."""
        if isinstance(records, (str, os.PathLike)):
            return os.fspath(records)
        if isinstance(records, Mapping):
            rows = [{"id": k, "output": v} for k, v in records.items()]
        else:
            rows = [dict(r) for r in records]
        with open(path, "w", encoding="utf-8") as f:
            if jsonl:
                for r in rows:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            else:
                json.dump({"task": task, "golds": rows}, f, ensure_ascii=False)
        return path

    def feedback(
        self,
        kind: str,
        task: str,
        *,
        data: Optional[PathLike] = None,
        split: Optional[str] = None,
        llm: str = "reference",
        store: Optional[PathLike] = None,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> str:
        """``attune feedback --kind doc|retriever|likelihood``: collects utility feedback into the store.

        Returns:
            The verb's summary line (the records themselves are in the store, where
            ``train`` reads them).
        """
        proc = self.run("feedback", kind=kind, task=task, data=data, split=split, llm=llm, store=self._store(store),
                        quiet=self._quiet(), timeout=timeout, **options)
        lines = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
        return lines[-1] if lines else ""

    # --- training ----------------------------------------------------------------------------

    def train(
        self,
        method: str,
        out: PathLike,
        *,
        task: str,
        data: Optional[PathLike] = None,
        init: Optional[PathLike] = None,
        llm: str = "reference",
        store: Optional[PathLike] = None,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """``attune train --method METHOD --out OUT``: learns from the reader's feedback.

        Args:
            method: ``ropg-kd``, ``ropg-rl``, ``rspg-pre``, ``rspg-post``, ``pearl``, ``purple``, ``ium``...
            out: the new model folder (refused if it holds a finished run; ``resume=True`` continues one).
            init: the encoder to start from (e.g. :meth:`pretrain_encoder`'s folder).
            **options: any other ``train`` option: ``epochs=2``, ``limit=500``, ``pool=[...]``...

        Returns:
            :func:`train_metadata` of ``out`` (``["train"]["best_epoch"]``, ``["train"]["epochs"]``...).
            The folder is a retriever spec by its path: pass it to :meth:`eval`.
        """
        self.run("train", method=method, task=task, data=data, init=init, llm=llm, out=out, store=self._store(store),
                 quiet=self._quiet(), timeout=timeout, **options)
        return train_metadata(self._path(out))

    def pretrain_encoder(
        self,
        out: PathLike,
        *,
        task: str,
        data: PathLike,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """``attune pretrain-encoder``: a small BERT encoder trained from scratch (a ``dense:`` model).

        ``options`` e.g. ``steps=150, lr=5e-4, hidden=128, layers=2, tokenizer=DIR``.
        Returns :func:`train_metadata` of ``out``.
        """
        self.run("pretrain-encoder", task=task, data=data, out=out, quiet=self._quiet(), timeout=timeout, **options)
        return train_metadata(self._path(out))

    def train_tokenizer(
        self,
        out: PathLike,
        inputs: Union[PathLike, Sequence[PathLike]],
        *,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """``attune train-tokenizer``: a byte-level BPE tokenizer trained on JSONL or text files.

        Returns :func:`train_metadata` of ``out`` (``["tokenizer"]``).
        """
        files = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
        args: List[PathLike] = ["train-tokenizer"]
        for f in files:
            args += ["--input", f]
        self.run(*args, out=out, timeout=timeout, **options)
        return train_metadata(self._path(out))

    # --- your own data, and the report ------------------------------------------------------

    def import_git(
        self,
        repo: PathLike,
        out: PathLike,
        *,
        timeout: Optional[float] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """``attune import-git``: the commit tasks (commit_subject, commit_area, commit_pick)
        from a local git repository, in the layout ``eval`` and ``train`` read with ``data=out``.

        ``options`` e.g. ``min_commits=20, max_train=0, seed=1, author_names=True``
        (docs/tasks.md, "From your own repository"). ``out`` must be new or empty.

        Returns:
            ``out/import.json``: ``{"repository", "head", "options", "seed", "commits",
            "kept_authors", "area_labels", "queries": {task: {split: count}}, ...}``.
        """
        self.run("import-git", os.path.expanduser(os.fspath(repo)), out=out, quiet=self._quiet(), timeout=timeout,
                 **options)
        with open(self._path(out) / "import.json", encoding="utf-8") as f:
            return cast(Dict[str, Any], json.load(f))

    def report(
        self,
        out: PathLike,
        *,
        evals: Sequence[PathLike] = (),
        trains: Sequence[PathLike] = (),
        title: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Path:
        """``attune report``: one self-contained HTML page (inline SVG, nothing fetched) from
        ``eval`` JSON files (``Attune.eval(..., out=F)`` or ``attune eval --out F``) and
        ``train`` folders. Returns the page's path.
        """
        if not evals and not trains:
            raise ValueError("report: give evals=[eval JSON files] and/or trains=[training folders]")
        args: List[PathLike] = ["report"]
        for e in evals:
            args += ["--eval", e]
        for t in trains:
            args += ["--train", t]
        self.run(*args, out=out, title=title, quiet=self._quiet(), timeout=timeout)
        return self._path(out)

    def _path(self, p: PathLike) -> Path:
        path = Path(p)
        return path if path.is_absolute() or self.cwd is None else Path(self.cwd) / path

    # --- tenants and the server --------------------------------------------------------------

    def tenant_add(self, name: str, *, store: Optional[PathLike] = None, key_only: bool = False) -> str:
        """``attune tenant add NAME``: creates a tenant (or with ``key_only`` a new key of one).

        Returns:
            The API key (``atk_`` + 40 hex digits). It is shown once: the store keeps its hash.
        """
        proc = self.run("tenant", "add", name, store=self._store(store), key_only=key_only)
        return proc.stdout.strip()

    def tenant_revoke(self, key_or_prefix: str, *, store: Optional[PathLike] = None) -> int:
        """``attune tenant revoke``: revokes a key (or the key with that 12-character prefix).

        Returns the number of keys revoked; the next request with the key gets 401.
        """
        proc = self.run("tenant", "revoke", key_or_prefix, store=self._store(store))
        m = re.search(r"revoked (\d+)", proc.stdout)
        return int(m.group(1)) if m else 0

    _TENANT = re.compile(r"^(?P<name>\S+): (?P<active_keys>\d+) active keys?, (?P<users>\d+) users, (?P<documents>\d+) "
                         r"documents, (?P<requests>\d+) requests, (?P<feedback_records>\d+) feedback records "
                         r"\(since (?P<created>[^)]*)\)$")
    _KEY = re.compile(r"^\s+(?P<prefix>\S+?)(?:\.\.\.)? created (?P<created>\S+?)(?:, revoked (?P<revoked>\S+))?$")

    def tenant_list(self, *, store: Optional[PathLike] = None) -> List[Dict[str, Any]]:
        """``attune tenant list``: each tenant, its counts and its keys by prefix.

        Returns:
            ``[{"name", "active_keys", "users", "documents", "requests", "feedback_records",
            "created", "keys": [{"prefix", "created", "revoked"}]}]`` (``revoked``: a time or None).
        """
        proc = self.run("tenant", "list", store=self._store(store))
        tenants: List[Dict[str, Any]] = []
        for line in proc.stdout.splitlines():
            m = self._TENANT.match(line)
            if m:
                t: Dict[str, Any] = {k: (v if k in ("name", "created") else int(v)) for k, v in m.groupdict().items()}
                t["keys"] = []
                tenants.append(t)
                continue
            m = self._KEY.match(line)
            if m and tenants:
                tenants[-1]["keys"].append(m.groupdict())
        return tenants

    def serve(
        self,
        *,
        store: Optional[PathLike] = None,
        port: int = 0,
        host: str = "127.0.0.1",
        config: Optional[Union[PathLike, Mapping[str, Any]]] = None,
        ready_timeout: float = 60.0,
        **options: Any,
    ) -> Server:
        """Starts ``attune serve`` in the background and waits until it answers ``/healthz``.

        Args:
            store: the store with the tenants (make them with :meth:`tenant_add` first).
            port: 0 (the default) takes any free port; :attr:`Server.url` says which.
            config: the deployment's config: a JSON file, or the dict itself (docs/serve.md).
            ready_timeout: seconds to wait for the server to listen.
            **options: other ``serve`` options, e.g. ``threads=1``, ``learn="on"``.

        Returns:
            A :class:`Server`; use it as a context manager, or call ``stop()``.

        Raises:
            CliError: the server exited before it was ready (its error line), or did not
                listen within ``ready_timeout``.
        """
        workdir = tempfile.TemporaryDirectory(prefix="attune-serve-")
        port_file = Path(workdir.name) / "port"
        log = Path(workdir.name) / "serve.log"
        config_path: Optional[str] = None
        if isinstance(config, Mapping):
            config_path = str(Path(workdir.name) / "config.json")
            with open(config_path, "w", encoding="utf-8") as f:
                json.dump(config, f)
        elif config is not None:
            config_path = os.fspath(config)
        argv = [self.binary, "serve"] + _flags(dict(store=self._store(store), host=host, port=port, port_file=port_file,
                                                     config=config_path, **options))
        with open(log, "wb") as err:
            process = subprocess.Popen(argv, cwd=self.cwd, env=self._environ(), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=err)
        server = Server(process, "", 0, workdir, log, argv)
        deadline = time.monotonic() + ready_timeout
        while True:
            if process.poll() is not None:
                text = server.stop()
                raise CliError(argv, process.returncode, text, verb="serve")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text.isdigit():
                break
            if time.monotonic() > deadline:
                text = server.stop()
                raise CliError(argv, -int(signal.SIGKILL), text + f"\nattune serve: not listening after {ready_timeout:g} s",
                               verb="serve")
            time.sleep(0.02)
        server.port = int(text)
        connect = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
        if ":" in connect and not connect.startswith("["):
            connect = f"[{connect}]"
        server.url = f"http://{connect}:{server.port}"
        try:
            server.client().wait_ready(max(1.0, deadline - time.monotonic()))
        except Exception:
            text = server.stop()
            raise CliError(argv, process.returncode if process.returncode is not None else -1, text, verb="serve")
        return server
