#!/usr/bin/env python3
"""rank_bm25 0.2.2 on the queries and profiles of bench_bm25's ProfileBm25 benchmarks, to
compare per-query times on the same machine (bench/RESULTS.md).

    python3 bench/rank_bm25_side_by_side.py [--shared ../shared] [--sizes 16,57,64,256]

Needs numpy (Debian 12: `apt-get install python3-numpy`). rank_bm25 itself is not packaged
by Debian, so its BM25 and BM25Okapi classes are re-typed below statement for statement from
release 0.2.2 (as tests/index/bm25_reference.py re-types them without numpy); nothing else
of it is used. The profiles and queries are those of bench/bench_bm25.cpp's profile_data():
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
import math
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit("rank_bm25_side_by_side: numpy is missing (Debian 12: apt-get install python3-numpy)")


class BM25:  # rank_bm25 0.2.2
    def __init__(self, corpus, tokenizer=None):
        self.corpus_size = 0
        self.avgdl = 0
        self.doc_freqs = []
        self.idf = {}
        self.doc_len = []
        self.tokenizer = tokenizer
        nd = self._initialize(corpus)
        self._calc_idf(nd)

    def _initialize(self, corpus):
        nd = {}  # word -> number of documents with word
        num_doc = 0
        for document in corpus:
            self.doc_len.append(len(document))
            num_doc += len(document)
            frequencies = {}
            for word in document:
                if word not in frequencies:
                    frequencies[word] = 0
                frequencies[word] += 1
            self.doc_freqs.append(frequencies)
            for word, freq in frequencies.items():
                try:
                    nd[word] += 1
                except KeyError:
                    nd[word] = 1
            self.corpus_size += 1
        self.avgdl = num_doc / self.corpus_size
        return nd

    def get_top_n(self, query, documents, n=5):
        assert self.corpus_size == len(documents), "The documents given don't match the index corpus!"
        scores = self.get_scores(query)
        top_n = np.argsort(scores)[::-1][:n]
        return [documents[i] for i in top_n]


class BM25Okapi(BM25):  # rank_bm25 0.2.2
    def __init__(self, corpus, tokenizer=None, k1=1.5, b=0.75, epsilon=0.25):
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon
        super().__init__(corpus, tokenizer)

    def _calc_idf(self, nd):
        idf_sum = 0
        negative_idfs = []
        for word, freq in nd.items():
            idf = math.log(self.corpus_size - freq + 0.5) - math.log(freq + 0.5)
            self.idf[word] = idf
            idf_sum += idf
            if idf < 0:
                negative_idfs.append(word)
        self.average_idf = idf_sum / len(self.idf)
        eps = self.epsilon * self.average_idf
        for word in negative_idfs:
            self.idf[word] = eps

    def get_scores(self, query):
        score = np.zeros(self.corpus_size)
        doc_len = np.array(self.doc_len)
        for q in query:
            q_freq = np.array([(doc.get(q) or 0) for doc in self.doc_freqs])
            score += (self.idf.get(q) or 0) * (q_freq * (self.k1 + 1) /
                                               (q_freq + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl)))
        return score


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
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, {len(queries)} queries "
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
