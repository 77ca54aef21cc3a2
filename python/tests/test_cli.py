"""attune.Attune: the CLI verbs run as subprocesses, their JSON parsed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import attune
from conftest import PYTHON_DIR


def test_find_binary(attune_bin: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert attune.find_binary(attune_bin) == os.path.abspath(attune_bin)
    monkeypatch.setenv("ATTUNE_BIN", attune_bin)
    assert attune.Attune().binary == os.path.abspath(attune_bin)
    monkeypatch.setenv("ATTUNE_BIN", str(tmp_path / "missing"))
    with pytest.raises(attune.BinaryNotFound, match="ATTUNE_BIN"):
        attune.Attune()
    monkeypatch.delenv("ATTUNE_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(attune.BinaryNotFound, match="PATH"):
        attune.find_binary()
    (tmp_path / "attune").symlink_to(attune_bin)
    assert attune.find_binary() == str(tmp_path / "attune")


def test_metrics_from_python_values_and_files(cli: attune.Attune, sample: Path) -> None:
    golds = sample / "commit_subject" / "dev_outputs.json"
    gold_rows = json.loads(golds.read_text())["golds"]
    perfect = cli.metrics("commit_subject", gold_rows, golds)
    assert perfect == {"rouge-1": 1.0, "rouge-L": 1.0}
    scores = cli.metrics("commit_subject", {"a": "fix the parser"}, {"a": "fix parser"})
    assert scores["rouge-1"] == pytest.approx(0.8)
    # Classification: labels given as a list.
    acc = cli.metrics("commit_area", {"a": "net", "b": "docs"}, {"a": "net", "b": "net"}, labels=["net", "docs"])
    assert acc["accuracy"] == pytest.approx(0.5)


def test_a_failed_verb_raises_cli_error(cli: attune.Attune, sample: Path) -> None:
    with pytest.raises(attune.CliError) as e:
        cli.metrics("commit_subject", {"a": "x"}, {"b": "y"})
    assert e.value.returncode == 1 and not e.value.usage_error
    assert 'no prediction for the gold id "b"' in e.value.message
    assert e.value.verb == "metrics" and "exit 1" in str(e.value)
    with pytest.raises(attune.CliError) as e:
        cli.eval("commit_subject", ["no-such-retriever"], data=sample)
    assert e.value.usage_error and "no-such-retriever" in e.value.message


def test_rank(cli: attune.Attune, sample: Path) -> None:
    ranks = cli.rank("commit_subject", "bm25", data=sample, split="dev", k=3)
    questions = json.loads((sample / "commit_subject" / "dev_questions.json").read_text())
    assert [r["id"] for r in ranks] == [q["id"] for q in questions]
    for r in ranks:
        assert len(r["ranking"]) == 3 and r["scores"] == sorted(r["scores"], reverse=True)


def test_eval_returns_the_json_report(cli: attune.Attune, sample: Path) -> None:
    report = cli.eval("commit_subject", ["none", "bm25"], data=sample, split="dev", llm="reference", limit=40)
    assert (report["task"], report["split"], report["k"]) == ("commit_subject", "dev", 4)
    assert set(report["results"]) == {"none", "bm25"}
    assert report["results"]["bm25"]["rouge-1"] > report["results"]["none"]["rouge-1"]
    assert len(report["per_example"]["bm25"]) == 40
    assert "bm25" in report.stdout and isinstance(report, dict)


def test_feedback_summary(cli: attune.Attune, sample: Path) -> None:
    line = cli.feedback("doc", "commit_subject", data=sample, split="dev", limit=10)
    assert line.startswith("feedback doc on commit_subject dev: 10 examples") and "records" in line


def test_train_then_eval_the_trained_folder(cli: attune.Attune, sample: Path, tmp_path: Path) -> None:
    # A tiny tokenizer and encoder of our own (no ../shared needed), then ROPG-KD on the
    # reference reader's feedback: about 2 s in all.
    texts = tmp_path / "texts.txt"
    questions = json.loads((sample / "commit_subject" / "train_questions.json").read_text())
    texts.write_text("\n".join(p["text"] for q in questions for p in q["profile"]) + "\n")
    tok = cli.train_tokenizer("tok", texts, vocab_size=600, special_tokens="[PAD],[UNK],[CLS],[SEP],[MASK]",
                              bos="[CLS]", eos="[SEP]", pad="[PAD]", no_bos=True)
    assert "tokenizer" in tok
    enc = cli.pretrain_encoder("enc", data=sample, task="commit_subject", tokenizer="tok", hidden=32, layers=1,
                               heads=2, max_length=32, batch_size=8, steps=2, seed=3)
    assert enc["train"]["steps"] == 2 and enc["train"]["options"]["hidden"] == 32
    meta = cli.train("ropg-kd", "kd", task="commit_subject", data=sample, init="enc", epochs=1, limit=20, dev_limit=10)
    assert meta["model"]["method"] == "ropg-kd" and meta["model"]["complete"] is True
    assert meta["train"]["method"] == "ropg-kd" and meta["train"]["options"]["train_examples"] == 20
    assert [e["epoch"] for e in meta["train"]["epochs"]] == [1]
    assert meta == attune.train_metadata(tmp_path / "kd")
    report = cli.eval("commit_subject", ["bm25", "kd"], data=sample, limit=10)
    assert set(report["results"]) == {"bm25", "kd"}
    # A finished folder is never written over.
    with pytest.raises(attune.CliError):
        cli.train("ropg-kd", "kd", task="commit_subject", data=sample, init="enc", epochs=1, limit=20)


def test_train_metadata_of_no_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        attune.train_metadata(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="attune_"):
        attune.train_metadata(tmp_path)


def test_tenants(cli: attune.Attune) -> None:
    key = cli.tenant_add("acme")
    assert key.startswith("atk_") and len(key) == 44
    second = cli.tenant_add("acme", key_only=True)
    cli.tenant_add("globex")
    with pytest.raises(attune.CliError) as e:
        cli.tenant_add("acme")
    assert e.value.usage_error and "exists" in e.value.message
    tenants = {t["name"]: t for t in cli.tenant_list()}
    assert set(tenants) == {"acme", "globex"}
    assert tenants["acme"]["active_keys"] == 2 and tenants["acme"]["documents"] == 0
    assert [k["prefix"] for k in tenants["acme"]["keys"]] == [key[:12], second[:12]]
    assert cli.tenant_revoke(second) == 1
    acme = next(t for t in cli.tenant_list() if t["name"] == "acme")
    assert acme["active_keys"] == 1 and acme["keys"][1]["revoked"]


def test_serve_refuses_a_bad_config(cli: attune.Attune) -> None:
    with pytest.raises(attune.CliError) as e:
        cli.serve(config={"no_such_key": 1}, ready_timeout=30)
    assert "no_such_key" in str(e.value)


def test_no_torch_in_python() -> None:
    # Importing the package loads nothing beyond the standard library.
    code = "import sys, attune; bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], cwd=str(PYTHON_DIR), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _git_history(repo: Path) -> None:
    """A small history with two authors (each with enough eligible commits), trailers and a merge-free line."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    words = " ".join(f"word{i}" for i in range(25))
    t = 1_600_000_000
    for i in range(12):
        for who in ("Ann", "Bob"):
            t += 60
            area = "net" if i % 2 else "docs"
            (repo / f"{who}.txt").write_text(f"{i}\n")
            env = dict(os.environ, GIT_AUTHOR_NAME=who, GIT_AUTHOR_EMAIL=f"{who.lower()}@example.org",
                       GIT_COMMITTER_NAME=who, GIT_COMMITTER_EMAIL=f"{who.lower()}@example.org",
                       GIT_AUTHOR_DATE=f"@{t} +0000", GIT_COMMITTER_DATE=f"@{t} +0000")
            subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
            msg = f"{area}: {who}'s change {i}\n\n{words} by {who}\n\nSigned-off-by: {who} <{who.lower()}@example.org>\n"
            subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", msg], check=True, env=env)


def test_import_git_then_eval_then_report(cli: attune.Attune, tmp_path: Path) -> None:
    if not shutil.which("git"):
        pytest.skip("needs the git program to build a repository (apt-get install git)")
    repo = tmp_path / "repo"
    _git_history(repo)
    info = cli.import_git(repo, tmp_path / "data", min_commits=10)
    assert info["kept_authors"] == 2 and info["commits"] == 24
    assert info["queries"]["commit_subject"] == {"train": 18, "dev": 2, "test": 2}
    assert sorted(info["area_labels"]) == ["docs", "net"]
    report = cli.eval("commit_subject", ["none", "bm25"], data=tmp_path / "data", split="test", k=1,
                      out=tmp_path / "eval.json")
    assert set(report["results"]) == {"none", "bm25"}
    page = cli.report(tmp_path / "report.html", evals=[tmp_path / "eval.json"], title="my repo")
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "my repo" in html
    with pytest.raises(attune.CliError) as e:  # an existing dataset folder is never written over
        cli.import_git(repo, tmp_path / "data", min_commits=10)
    assert e.value.usage_error and "already exists" in e.value.message
    with pytest.raises(ValueError):
        cli.report(tmp_path / "empty.html")
