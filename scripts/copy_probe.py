#!/usr/bin/env python3
"""Does a language model copy from its context?  (docs/RESULTS.md, 2026-12-04)

Each trial draws two texts T and U of WORDS random words (from the subjects of the first 3,001
commits of commits.jsonl) and asks `attune score` for log p(T | T + SEP) and log p(T | U + SEP).
A model with in-context copying (induction heads) gives T after itself most of its probability:
the mean gap "same - other" is tens of nats for 12 words. A model without it scores T alike after
either: a gap of a few nats.

    python3 scripts/copy_probe.py runs/cpu/q6/lm          # a language model
    python3 scripts/copy_probe.py runs/cpu/q6/reader      # a reader scores "\\n" + T + EOS
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("model", help="a local: model folder (train-lm's output)")
ap.add_argument("--attune", default=os.path.join(here, "..", "build", "tools", "attune", "attune"))
ap.add_argument("--commits", default=os.path.join(here, "..", "..", "shared", "data", "text", "commits.jsonl"))
ap.add_argument("--trials", type=int, default=8)
ap.add_argument("--words", type=int, default=12)
ap.add_argument("--sep", default="\\n", help="what follows the first text (backslash escapes; default a newline)")
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
if not os.path.isfile(os.path.join(a.model, "config.json")):
    sys.exit(f"copy_probe: {a.model}: no config.json (give a train-lm output folder)")
if not os.path.isfile(a.commits):
    sys.exit(f"copy_probe: {a.commits}: no such file (give --commits)")
sep = a.sep.encode().decode("unicode_escape")
random.seed(a.seed)
words = []
with open(a.commits) as f:
    for i, line in enumerate(f):
        if i > 3000:
            break
        words += json.loads(line)["subject"].split()
vocab = sorted(set(w for w in words if w.isalpha() and 3 <= len(w) <= 9))


def score(prompt, target):
    r = subprocess.run([a.attune, "score", "--llm", "local:" + a.model, "--prompt", prompt, "--target", target],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"copy_probe: attune score failed: {r.stderr.strip()}")
    return float(r.stdout.strip())


rows = []
for _ in range(a.trials):
    t = " ".join(random.sample(vocab, a.words))
    u = " ".join(random.sample(vocab, a.words))
    rows.append((score(t + sep, t), score(u + sep, t)))
    print(f"{rows[-1][0]:8.2f} {rows[-1][1]:8.2f}", flush=True)
same, other = statistics.mean(r[0] for r in rows), statistics.mean(r[1] for r in rows)
print(f"{a.model}: log p(T | T) {same:.2f}, log p(T | U) {other:.2f}, gap {same - other:.2f} nats "
      f"({a.trials} trials of {a.words} words, seed {a.seed})")
