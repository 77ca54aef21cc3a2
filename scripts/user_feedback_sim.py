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
4. Counted: the filing of each class, and, through GET /v1/corpus/documents/uf-ID, whether
   each filed-nowhere or personal conversation's document reached the shared corpus (it
   must never); at the end the corpus is listed whole and must hold the passages plus the
   conversations filed shared, nothing else.
5. Then each preference filed personal is looked for in /v1/retrieve's top --top-k (shared
   corpus + personal documents): its owner asking about its package ("recommend P"), its
   owner asking about another package, and another user asking about P (it must never be
   served to them). --retriever ranks; --personal-encoder and --personal-threshold set the
   server's personal similarity threshold (paper 004's 0.5; docs/serve.md).

Exits 1 when any incorrect feedback reaches the shared corpus, or a personal document
reaches another user. Standard library and the
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
    ap.add_argument("--retriever", default="bm25", help="the server's retriever (it ranks shared and personal together)")
    ap.add_argument("--personal-encoder", help="the server's personal.encoder (off when not given)")
    ap.add_argument("--personal-threshold", type=float, default=0.5, help="the server's personal.threshold")
    ap.add_argument("--top-k", type=int, default=5, help="the retrieve calls' k for the personal-document counts")
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
        convs.append({"id": f"sim{i}", "user": f"u{i}", "label": kind, "said": said, "package": title})

    with tempfile.TemporaryDirectory(prefix="attune-uf-sim-") as tmp:
        cli = attune.Attune(binary, store=os.path.join(tmp, "sim.db"), quiet=True)
        key = cli.tenant_add("sim")
        config = {"user_feedback": {"llm": a.llm}, "retriever": a.retriever}
        if a.personal_encoder:
            config["personal"] = {"encoder": os.path.abspath(a.personal_encoder), "threshold": a.personal_threshold}
        with cli.serve(config=config) as server:
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
                # What reached the shared corpus: the conversation's document, read back by id.
                try:
                    c.get_corpus_document("uf-" + cv["id"])
                    in_corpus = True
                except attune.NotFound:
                    in_corpus = False
                reached_shared[cv["label"]] += in_corpus
                results.append({**cv, "filing": r["filing"], "in_shared_corpus": in_corpus, "package": cv["package"]})
            # The preferences filed personal: served to their owner (about its package, about
            # another) and to another user (never).
            served = Counter()
            personal = [x for x in results if x["filing"] == "personal"]
            titles = sorted({t for _, t, _ in passages})
            for i, x in enumerate(personal):
                doc = "uf-" + x["id"]
                other_pkg = rng.choice(titles)
                while other_pkg == x["package"]:
                    other_pkg = rng.choice(titles)
                other_user = personal[(i + 1) % len(personal)]["user"] if len(personal) > 1 else "nobody"
                for name, user, query in (("owner, its package", x["user"], "recommend " + x["package"]),
                                          ("owner, another package", x["user"], "recommend " + other_pkg),
                                          ("another user, its package", other_user, "recommend " + x["package"])):
                    got = c.retrieve(user, query, k=a.top_k)["documents"]
                    served[name] += any(d["id"] == doc and d["source"] == "user" for d in got)
            metrics = c.metrics()
            corpus_ids = {d["id"] for d in c.iter_corpus_documents()}
            expected_ids = {pid for pid, _, _ in passages} | {"uf-" + x["id"] for x in results if x["filing"] == "shared"}
            if corpus_ids != expected_ids:
                print(f"FAIL: the shared corpus holds {len(corpus_ids - expected_ids)} documents it should not and lacks "
                      f"{len(expected_ids - corpus_ids)}", file=sys.stderr)
                return 1
    cols = ["shared", "personal", "rejected", "no_information", "failed"]
    print(f"{len(convs)} conversations, {len(passages)} passages, llm {a.llm}, seed {a.seed}; "
          f"the shared corpus holds {len(corpus_ids)} documents afterwards")
    print(f"{'class':<18}" + "".join(f"{x:>16}" for x in cols) + f"{'in shared corpus':>18}")
    for label in ["correct-shared", "correct-personal", "incorrect"]:
        row = ended[label]
        print(f"{label:<18}" + "".join(f"{row[x]:>16}" for x in cols) + f"{reached_shared[label]:>18}")
    print(f"\npreferences filed personal ({len(personal)}), in /v1/retrieve's top {a.top_k} (retriever {a.retriever}, "
          + (f"personal.encoder {a.personal_encoder}, threshold {a.personal_threshold}" if a.personal_encoder
             else "no personal threshold") + "):")
    for name in ("owner, its package", "owner, another package", "another user, its package"):
        print(f"  {name:<28}{served[name]:>6}")
    for line in metrics.splitlines():
        if line.startswith("attune_personal_documents_"):
            print("  " + line)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    if reached_shared["incorrect"]:
        print(f"FAIL: {reached_shared['incorrect']} incorrect conversations reached the shared corpus", file=sys.stderr)
        return 1
    if served["another user, its package"]:
        print(f"FAIL: {served['another user, its package']} personal documents were served to another user", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
