#!/usr/bin/env python3
"""scripts/eval_reader.sh's dev-phase rules: reads its dev reports in EVAL and writes EVAL/choice.json, the decodings the
test phase uses. Usage: reader_choice.py EVAL

- qa: the decoding with the higher BM25 top-5 exact match on qa_dev questions 1,001-2,000 (qa_sel_{free,copy}.json).
- commit_subject: the target is a p-value (BM25 top-4 beats none at p < 0.05), so the decoding whose dev report gives
  BM25 over none the smaller paired-test p, among those whose gain is positive (2026-12-03; until then the larger gain,
  which for one seed picked copy at p = 0.022 over free at p = 0.0005, docs/RESULTS.md). Neither positive: free.
- commit_area: free (its answers are area names).
A tie goes to free. A task whose reports are missing gets no entry (the test phase then refuses it); a commit_subject
report without its paired test is refused (rc 1), not chosen another way.
"""

from __future__ import annotations

import json
import os
import sys

from compare_readers import paired_p  # scripts/, beside this file

RULES = {"qa": "higher BM25 top-5 exact match on qa_dev questions 1,001-2,000",
         "commit_subject": "smaller dev paired-test p of BM25 top-4 over none (ROUGE-1), among positive gains",
         "commit_area": "free"}


def load(d: str, name: str) -> dict | None:
    p = os.path.join(d, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None


def choose(d: str) -> dict:
    choice: dict = {"rules": RULES, "commit_area": "free", "dev": {}}
    qa = {dec: load(d, "qa_sel_" + dec) for dec in ("free", "copy")}
    if all(qa.values()):
        em = {dec: qa[dec]["results"]["bm25"]["exact_match"] for dec in qa}
        choice["dev"]["qa_bm25_exact_match"] = em
        choice["qa"] = "copy" if em["copy"] > em["free"] else "free"
    subj = {dec: load(d, "subject_dev_" + dec) for dec in ("free", "copy")}
    if all(subj.values()):
        gain, p = {}, {}
        for dec, rep in subj.items():
            r = rep["results"]
            gain[dec] = r["bm25"]["rouge-1"] - r["none"]["rouge-1"]
            p[dec] = paired_p(rep, "bm25", "none", "rouge-1")
            if p[dec] is None:
                raise ValueError(f"subject_dev_{dec}.json has no paired test of bm25 over none (rouge-1): "
                                 "run its attune eval again with --out")
        choice["dev"]["commit_subject_gain"] = gain
        choice["dev"]["commit_subject_p"] = p
        choice["commit_subject"] = "copy" if gain["copy"] > 0 and (gain["free"] <= 0 or p["copy"] < p["free"]) else "free"
    return choice


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        choice = choose(argv[1])
    except ValueError as e:
        print(f"reader_choice.py: {e}", file=sys.stderr)
        return 1
    tmp = os.path.join(argv[1], "choice.json.part")
    with open(tmp, "w") as f:
        json.dump(choice, f, indent=2)
    os.replace(tmp, os.path.join(argv[1], "choice.json"))
    print(json.dumps(choice, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
