#!/usr/bin/env python3
"""Compares readers (e.g. one recipe trained with several seeds) on the reports of
scripts/eval_reader.sh, so that a recipe is judged by its mean over seeds, not by one run.

    python3 scripts/compare_readers.py runs/cpu/q4t/eval runs/cpu/s1/eval runs/cpu/s2/eval

For each report name found in at least two of the folders (subject_dev_free.json, ...) it prints
each folder's value of every row and of the gain (the second row minus the first, e.g. BM25 minus
none) with the report's own paired-test p of that gain, then their mean, sample standard deviation,
and range, and a t over the folders of the mean gain. Reports must agree on task, split, k,
generation options, examples and rows (retrievers), or the script refuses: a mean over unlike
reports would be a wrong number. Only the reports' primary metric is read (ROUGE-1, accuracy, exact match)."""
import json
import math
import os
import statistics
import sys

PRIMARY = {"commit_subject": "rouge-1", "commit_area": "accuracy", "qa": "exact_match"}


def paired_p(report, better, worse, metric):
    """The report's paired-test p of row `better` over row `worse` on `metric` (attune eval --out), or None."""
    sig = report.get("significance", {}).get(better, {}).get(worse, {}).get(metric)
    return sig["p"] if sig and "p" in sig else None


def load(folder, name):
    path = os.path.join(folder, name)
    return json.load(open(path)) if os.path.isfile(path) else None


def main(argv):
    if len(argv) < 3 or any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip())
        return 0 if any(a in ("-h", "--help") for a in argv[1:]) else 2
    folders = argv[1:]
    for f in folders:
        if not os.path.isdir(f):
            print(f"no folder {f}", file=sys.stderr)
            return 2
    names = sorted({n for f in folders for n in os.listdir(f) if n.endswith(".json") and n != "choice.json"})
    printed = 0
    for name in names:
        reps = [(f, load(f, name)) for f in folders]
        reps = [(f, r) for f, r in reps if r is not None and "results" in r]
        if len(reps) < 2:
            continue
        first = reps[0][1]
        for f, r in reps[1:]:
            for key in ("task", "split", "k", "generate", "examples"):
                if r.get(key) != first.get(key):
                    print(f"{name}: {f} differs from {reps[0][0]} in {key} ({r.get(key)!r} vs {first.get(key)!r}): not compared",
                          file=sys.stderr)
                    return 1
            if list(r["results"]) != list(first["results"]):
                print(f"{name}: {f} differs from {reps[0][0]} in its rows ({list(r['results'])} vs "
                      f"{list(first['results'])}): not compared", file=sys.stderr)
                return 1
        metric = PRIMARY.get(first["task"])
        if metric is None:
            print(f"{name}: task {first['task']} has no primary metric here", file=sys.stderr)
            return 1
        rows = list(first["results"].keys())
        print(f"== {name}: {first['task']} {first['split']}, k={first['k']}, {first['examples']} examples, {metric}")
        cols = rows + ([f"{rows[1]}-{rows[0]}"] if len(rows) >= 2 else [])
        print(f"{'reader':<28}" + "".join(f"{c:>16}" for c in cols) + ("   p (gain)" if len(rows) >= 2 else ""))
        values = {c: [] for c in cols}
        for f, r in reps:
            vals = [r["results"][row][metric] for row in rows]
            if len(rows) >= 2:
                vals.append(vals[1] - vals[0])
            for c, v in zip(cols, vals):
                values[c].append(v)
            label = os.path.normpath(f)
            line = f"{label[-28:]:<28}" + "".join(f"{v:>16.4f}" for v in vals)
            if len(rows) >= 2:  # the report's own paired test of the gain, when it has one
                p = paired_p(r, rows[1], rows[0], metric)
                line += f"   {p:.4f}" if p is not None else "   -"
            print(line)
        n = len(reps)
        mean = [statistics.mean(values[c]) for c in cols]
        sd = [statistics.stdev(values[c]) for c in cols]
        print(f"{'mean of ' + str(n):<28}" + "".join(f"{v:>16.4f}" for v in mean))
        print(f"{'sd (n-1)':<28}" + "".join(f"{v:>16.4f}" for v in sd))
        print(f"{'min .. max':<28}" + "".join(f"{min(values[c]):.4f}..{max(values[c]):.4f}".rjust(16) for c in cols))
        if len(rows) >= 2:
            gains = values[cols[-1]]
            se = statistics.stdev(gains) / math.sqrt(n)
            t = mean[-1] / se if se > 0 else float("inf")
            print(f"gain over seeds: mean {mean[-1]:+.4f}, standard error {se:.4f}, t = {t:.2f} with {n - 1} df")
        print()
        printed += 1
    if printed == 0:
        print("no report is in two or more of the folders", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
