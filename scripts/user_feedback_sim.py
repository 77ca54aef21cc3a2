#!/usr/bin/env python3
"""The user-feedback simulation of paper 004 (40% correct-shared, 40% correct-personal, 20%
incorrect feedback), run through `attune serve`'s API, counting where each class ends.

    python3 scripts/user_feedback_sim.py --corpus ../shared/data/debian/debian_corpus.jsonl \\
        --llm planted:curator --conversations 500 --passages 5000

1. A tenant's shared corpus gets the first --passages passages (each "PACKAGE: TEXT").
2. Conversations are drawn (seeded) from those passages:
   - correct-shared: a user states a package's own description ("P <words of P's passage>");
   - correct-personal: a user states a preference ("I prefer P for my own machines");
   - incorrect: a user attributes another package's description to P.
3. Each is posted to POST /v1/conversations/{id}/feedback by a user of its own.
4. Counted: the filing of each class, and, through GET /search, whether each filed-nowhere
   or personal conversation's document reached the shared corpus (it must never).

Exits 1 when any incorrect feedback reaches the shared corpus. Standard library and the
python/ package only; ATTUNE_BIN (or build/tools/attune/attune) is the binary.
"""
import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import attune  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="corpus JSONL: {id, title, text} per line")
    ap.add_argument("--llm", default="planted:curator", help="the server's user_feedback.llm")
    ap.add_argument("--passages", type=int, default=5000)
    ap.add_argument("--conversations", type=int, default=500)
    ap.add_argument("--words", type=int, default=12, help="words of a description a user states")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write every conversation's result here (JSONL)")
    a = ap.parse_args()
    binary = os.environ.get("ATTUNE_BIN", os.path.join(ROOT, "build", "tools", "attune", "attune"))
    passages = []
    with open(a.corpus, encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            words = p["text"].split()
            if words[:1] == ["Section:"]:
                words = words[2:]  # "Section: NAME." is not a description
            if len(words) >= a.words:
                passages.append((p["id"], p["title"], words))
            if len(passages) == a.passages:
                break
    rng = random.Random(a.seed)
    n_shared = a.conversations * 2 // 5
    n_personal = a.conversations * 2 // 5
    kinds = ["correct-shared"] * n_shared + ["correct-personal"] * n_personal
    kinds += ["incorrect"] * (a.conversations - len(kinds))
    rng.shuffle(kinds)
    convs = []
    for i, kind in enumerate(kinds):
        _, title, words = rng.choice(passages)
        if kind == "correct-shared":
            said = title + " " + " ".join(words[: a.words])
        elif kind == "correct-personal":
            said = f"I prefer {title} for my own machines"
        else:
            other = rng.choice(passages)
            while other[1] == title:
                other = rng.choice(passages)
            said = title + " " + " ".join(other[2][: a.words])
        convs.append({"id": f"sim{i}", "user": f"u{i}", "label": kind, "said": said})

    with tempfile.TemporaryDirectory(prefix="attune-uf-sim-") as tmp:
        cli = attune.Attune(binary, store=os.path.join(tmp, "sim.db"), quiet=True)
        key = cli.tenant_add("sim")
        with cli.serve(config={"user_feedback": {"llm": a.llm}}) as server:
            c = server.client(key)
            docs = [{"id": pid, "text": f"{title}: {' '.join(words)}"} for pid, title, words in passages]
            for i in range(0, len(docs), 1000):
                c.add_corpus_documents(docs[i:i + 1000])
            ended = defaultdict(Counter)
            reached_shared = Counter()
            results = []
            for cv in convs:
                msgs = [{"role": "assistant", "content": "How can I help?"}, {"role": "user", "content": cv["said"]}]
                r = c.conversation_feedback(cv["id"], cv["user"], msgs)
                ended[cv["label"]][r["filing"]] += 1
                # What reached the shared corpus: the conversation's document among the corpus's hits.
                hits = c.search(r["summary"] or cv["said"], k=10)["topk"]
                in_corpus = any(h["pid"] == "uf-" + cv["id"] for h in hits)
                reached_shared[cv["label"]] += in_corpus
                results.append({**cv, "filing": r["filing"], "in_shared_corpus": in_corpus})
    cols = ["shared", "personal", "rejected", "no_information", "failed"]
    print(f"{len(convs)} conversations, {len(passages)} passages, llm {a.llm}, seed {a.seed}")
    print(f"{'class':<18}" + "".join(f"{x:>16}" for x in cols) + f"{'in shared corpus':>18}")
    for label in ["correct-shared", "correct-personal", "incorrect"]:
        row = ended[label]
        print(f"{label:<18}" + "".join(f"{row[x]:>16}" for x in cols) + f"{reached_shared[label]:>18}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    if reached_shared["incorrect"]:
        print(f"FAIL: {reached_shared['incorrect']} incorrect conversations reached the shared corpus", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
