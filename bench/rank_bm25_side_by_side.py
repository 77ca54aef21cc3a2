#!/usr/bin/env python3
"""rank_bm25 0.2.2 on the queries and profiles of bench_bm25's ProfileBm25 benchmarks, to
compare per-query times on the same machine (bench/RESULTS.md).

    python3 bench/rank_bm25_side_by_side.py [--shared ../shared] [--sizes 16,57,64,256]

Needs numpy (Debian 12: `apt-get install python3-numpy`) and rank_bm25 0.2.2, which Debian
does not package and this repository does not copy: `pip install rank_bm25==0.2.2`, or its
rank_bm25.py in a folder on PYTHONPATH. The profiles and queries are those of
bench/bench_bm25.cpp's profile_data():
git/commit_subject/dev_questions.json, each query the text after "description:" (stripped),
the documents title + " " + text pooled in file order up to 8,192, profile p of size n the
documents from (p * n) % (count - n), queries over 16 profiles in turn.

Two timings a size, each the mean over 1,000 queries, three rounds:
  lamp: what LaMP does per query (and what attune's kept statistics replace): tokenize the
        profile with str.split(), build BM25Okapi, split the query, get_top_n(n=5).
  kept: get_scores only, on BM25Okapi objects built beforehand.
"""
import argparse
import json
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit("rank_bm25_side_by_side: numpy is missing (Debian 12: apt-get install python3-numpy)")
try:
    import rank_bm25
    from rank_bm25 import BM25Okapi
except ImportError:
    sys.exit("rank_bm25_side_by_side: rank_bm25 is missing (pip install rank_bm25==0.2.2, or put its "
             "rank_bm25.py in a folder on PYTHONPATH)")


def rank_bm25_version():
    try:
        from importlib.metadata import version
        return version("rank_bm25")
    except Exception:  # loaded from a file on PYTHONPATH: no package metadata
        return f"from {rank_bm25.__file__} (no package metadata)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ap.add_argument("--sizes", default="16,57,64,256")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    path = os.path.join(a.shared, "data/git/commit_subject/dev_questions.json")
    if not os.path.exists(path):
        sys.exit(f"rank_bm25_side_by_side: {path} not found (--shared DIR)")
    docs, queries = [], []
    for q in json.load(open(path)):
        text = q["input"]
        at = text.find("description:")
        queries.append((text[at + len("description:"):] if at >= 0 else text).strip())
        for p in q["profile"]:
            if len(docs) >= 8192:
                break
            docs.append(p["title"] + " " + p["text"])
    print(f"rank_bm25 {rank_bm25_version()}, numpy {np.__version__}, python {sys.version.split()[0]}, {len(queries)} queries "
          f"({sum(len(q.split()) for q in queries) / len(queries):.1f} tokens on average)")
    for n in [int(s) for s in a.sizes.split(",")]:
        profiles = []
        for p in range(16):
            start = (p * n) % (len(docs) - n)
            profiles.append(docs[start:start + n])
        kept = [BM25Okapi([d.split() for d in c]) for c in profiles]
        for r in range(a.rounds):
            t = time.perf_counter()
            for i in range(a.queries):
                corpus = profiles[i % 16]
                bm25 = BM25Okapi([x.split() for x in corpus])
                bm25.get_top_n(queries[i % len(queries)].split(), corpus, n=5)
            lamp = (time.perf_counter() - t) / a.queries
            t = time.perf_counter()
            for i in range(a.queries):
                kept[i % 16].get_scores(queries[i % len(queries)].split())
            only = (time.perf_counter() - t) / a.queries
            print(f"n={n} round {r + 1}: lamp {lamp * 1e6:.0f} us, kept {only * 1e6:.0f} us a query", flush=True)


if __name__ == "__main__":
    main()
