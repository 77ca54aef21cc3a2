"""scripts/compare_readers.py: a recipe's rows over seeds, from eval_reader.sh's reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SOURCE_ROOT

SCRIPT = SOURCE_ROOT / "scripts" / "compare_readers.py"


def report(folder: Path, name: str, none: float, bm25: float, generate: str = "max_new_tokens=48",
           p: float | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rep = {"task": "commit_subject", "split": "dev", "k": 4, "generate": generate, "examples": 500,
           "results": {"none": {"rouge-1": none, "rouge-L": 0.0}, "bm25": {"rouge-1": bm25, "rouge-L": 0.0}}}
    if p is not None:  # eval --out's paired test, bm25 against none
        rep["significance"] = {"bm25": {"none": {"rouge-1": {"test": "paired-t", "p": p, "better": bm25 > none}}}}
    (folder / name).write_text(json.dumps(rep))


def run(*folders: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, folders)], capture_output=True, text=True)


def test_mean_and_spread_over_seeds(tmp_path: Path) -> None:
    a, b, c = tmp_path / "s0", tmp_path / "s1", tmp_path / "s2"
    report(a, "subject_dev_free.json", 0.10, 0.13, p=0.0123)
    report(b, "subject_dev_free.json", 0.11, 0.12)
    report(c, "subject_dev_free.json", 0.12, 0.14)
    (c / "choice.json").write_text("{}")
    r = run(a, b, c)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    mean = next(line for line in lines if line.startswith("mean of 3")).split()[3:]
    assert [float(v) for v in mean] == [0.11, 0.13, 0.02]
    sd = next(line for line in lines if line.startswith("sd (n-1)")).split()[2:]
    assert [float(v) for v in sd] == [0.01, 0.01, 0.01]
    assert "gain over seeds: mean +0.0200, standard error 0.0058, t = 3.46 with 2 df" in r.stdout
    # each reader's own p of its gain, from its report; "-" where the report has no test
    rows = {line.split()[0][-2:]: line.split() for line in lines if line and "/s" in line.split()[0]}
    assert rows["s0"][-1] == "0.0123" and rows["s1"][-1] == "-"
    assert next(line for line in lines if line.startswith("min .. max")).split()[3:] == \
        ["0.1000..0.1200", "0.1200..0.1400", "0.0100..0.0300"]


def test_unlike_reports_are_refused(tmp_path: Path) -> None:
    # A mean over reports made with other generation options would be a wrong number.
    report(tmp_path / "s0", "subject_dev_free.json", 0.10, 0.13)
    report(tmp_path / "s1", "subject_dev_free.json", 0.11, 0.12, generate="max_new_tokens=128")
    r = run(tmp_path / "s0", tmp_path / "s1")
    assert r.returncode == 1
    assert "differs" in r.stderr and "generate" in r.stderr and "not compared" in r.stderr
    assert "mean of" not in r.stdout
    # the same options but other rows (retrievers): refused too
    d = tmp_path / "rows"
    report(d, "subject_dev_free.json", 0.11, 0.12)
    rep = json.loads((d / "subject_dev_free.json").read_text())
    rep["results"] = {"bm25": rep["results"]["bm25"], "none": rep["results"]["none"]}
    (d / "subject_dev_free.json").write_text(json.dumps(rep))
    report(tmp_path / "rows0", "subject_dev_free.json", 0.10, 0.13)
    r = run(tmp_path / "rows0", d)
    assert r.returncode == 1 and "in its rows" in r.stderr and "mean of" not in r.stdout


def test_nothing_in_common_is_an_error(tmp_path: Path) -> None:
    report(tmp_path / "s0", "subject_dev_free.json", 0.10, 0.13)
    report(tmp_path / "s1", "subject_dev_copy.json", 0.11, 0.12)
    r = run(tmp_path / "s0", tmp_path / "s1")
    assert r.returncode == 1 and "no report is in two or more" in r.stderr
    r = run(tmp_path / "s0", tmp_path / "missing")
    assert r.returncode == 2 and "no folder" in r.stderr


CHOICE = SOURCE_ROOT / "scripts" / "reader_choice.py"


def choose(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHOICE), str(folder)], capture_output=True, text=True)


def qa_report(folder: Path, dec: str, em: float) -> None:
    (folder / f"qa_sel_{dec}.json").write_text(json.dumps({"task": "qa", "results": {"bm25": {"exact_match": em}}}))


def test_choice_picks_the_smaller_p_not_the_larger_gain(tmp_path: Path) -> None:
    # s3's case: copy gains more (+0.016) but free is the significant one
    report(tmp_path, "subject_dev_free.json", 0.1059, 0.1205, p=0.0005)
    report(tmp_path, "subject_dev_copy.json", 0.1129, 0.1288, p=0.022)
    qa_report(tmp_path, "free", 0.191)
    qa_report(tmp_path, "copy", 0.427)
    r = choose(tmp_path)
    assert r.returncode == 0, r.stderr
    c = json.loads((tmp_path / "choice.json").read_text())
    assert c["commit_subject"] == "free" and c["qa"] == "copy" and c["commit_area"] == "free"
    assert c["dev"]["commit_subject_p"] == {"free": 0.0005, "copy": 0.022}
    # the other way round, copy is chosen
    report(tmp_path, "subject_dev_copy.json", 0.1129, 0.1288, p=0.0001)
    assert choose(tmp_path).returncode == 0
    assert json.loads((tmp_path / "choice.json").read_text())["commit_subject"] == "copy"


def test_choice_never_picks_a_loss_and_refuses_a_report_without_its_test(tmp_path: Path) -> None:
    # copy's small p is for BM25 doing worse: not chosen
    report(tmp_path, "subject_dev_free.json", 0.11, 0.115, p=0.30)
    report(tmp_path, "subject_dev_copy.json", 0.12, 0.10, p=0.001)
    assert choose(tmp_path).returncode == 0
    c = json.loads((tmp_path / "choice.json").read_text())
    assert c["commit_subject"] == "free" and "qa" not in c  # no qa reports: no qa entry, the test phase refuses
    # a report without its paired test is refused, and the old choice.json is left as it was
    report(tmp_path, "subject_dev_copy.json", 0.12, 0.13)
    r = choose(tmp_path)
    assert r.returncode == 1 and "no paired test" in r.stderr
    assert json.loads((tmp_path / "choice.json").read_text()) == c
    assert choose(tmp_path / "missing").returncode == 2
