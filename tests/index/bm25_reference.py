#!/usr/bin/env python3
"""rank_bm25 0.2.2 BM25Okapi re-typed with plain Python floats (numpy and rank_bm25 are
not installed here). numpy's element-wise float64 ops are IEEE-exact, so each array
expression below is evaluated element by element in the same order. Prints the expected
values used in test_bm25.cpp (repr() gives literals that parse to the exact doubles)."""
import math


class BM25Okapi:
    def __init__(self, corpus, k1=1.5, b=0.75, epsilon=0.25):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = 0
        self.doc_freqs, self.idf, self.doc_len = [], {}, []
        nd, num_doc = {}, 0
        for document in corpus:
            self.doc_len.append(len(document))
            num_doc += len(document)
            frequencies = {}
            for word in document:
                frequencies[word] = frequencies.get(word, 0) + 1
            self.doc_freqs.append(frequencies)
            for word in frequencies:
                nd[word] = nd.get(word, 0) + 1
            self.corpus_size += 1
        self.avgdl = num_doc / self.corpus_size
        idf_sum, negative_idfs = 0, []
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
        score = [0.0] * self.corpus_size
        for q in query:
            w = self.idf.get(q) or 0
            for i, doc in enumerate(self.doc_freqs):
                tf = doc.get(q) or 0
                denom = tf + self.k1 * ((1 - self.b) + self.b * self.doc_len[i] / self.avgdl)
                score[i] += w * (tf * (self.k1 + 1) / denom)
        return score


def order(scores):  # np.argsort(scores)[::-1] with a stable argsort
    return sorted(range(len(scores)), key=lambda i: scores[i])[::-1]


if __name__ == "__main__":
    corpus = [s.split() for s in [
        "apple banana apple cherry",
        "banana cherry date fig",
        "banana cherry date grape",
        "banana kiwi",
    ]]
    bm = BM25Okapi(corpus)
    print("avgdl", repr(bm.avgdl), "average_idf", repr(bm.average_idf))
    for w in ["apple", "banana", "cherry", "date", "fig", "grape", "kiwi"]:
        print("idf", w, repr(bm.idf[w]))
    for q in ["fig grape", "banana banana apple zzz", "date", "", "kiwi cherry"]:
        s = bm.get_scores(q.split())
        print(repr(q), [repr(x) for x in s], order(s))

    bm = BM25Okapi(corpus, k1=1.2, b=0.5, epsilon=0.3)
    s = bm.get_scores("banana apple kiwi".split())
    print("k1=1.2 b=0.5 eps=0.3", repr(bm.average_idf), [repr(x) for x in s], order(s))
