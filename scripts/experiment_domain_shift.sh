#!/usr/bin/env bash
# Issue 18 / paper 004: LUF under a question-domain shift on Debian qa.
#
#   ENC=DIR bash scripts/experiment_domain_shift.sh
#
# The corpus's sections are split in two domains: A, libraries and programming languages
# (SECTIONS_A below), and B, everything else (end-user programs: utils, net, admin, games,
# sound, science, ...). A question belongs to the section of its gold passage.
#   1. M0: LUF from ENC on N_A questions of A, judged by JUDGE; its epoch kept on 300 A dev
#      questions. This is the frozen retriever. Every model reranks BM25's top TOP_L.
#   2. The stream: B's training questions, shuffled (SEED), CHUNKS chunks of CHUNK. After
#      each chunk, LUF continues from the model before it on that chunk's judged labels: M1,
#      M2, ... Each update keeps its epoch on 200 B training questions held out of the stream
#      (never the evaluation questions).
#   3. Every model, BM25 and ENC as rerankers of BM25's top 20, on EVAL questions of B's dev
#      split (the shifted domain; nothing was chosen on them): R@5, exact match with the
#      reference reader at k = 5, and paired significance (attune eval).
# Every step is skipped when its output exists, so a stopped run goes on where it was.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${ATTUNE:-./build/tools/attune/attune}
: "${ENC:?ENC=an encoder folder (pretrain-encoder) to start from}"
OUT=${OUT:-runs/domain-shift}
JUDGE=${JUDGE:-planted:judge?answer_at=0.8}
DATA=${DATA:-../shared/data/debian}
SEED=${SEED:-0}
N_A=${N_A:-4000}
CHUNK=${CHUNK:-1000}
CHUNKS=${CHUNKS:-3}
EVAL=${EVAL:-1000}
EPOCHS=${EPOCHS:-2}
LR=${LR:-1e-3}                # M0's peak learning rate (train's default for luf)
LR_UPDATE=${LR_UPDATE:-$LR}   # the stream's updates (paper 004: 5e-6 to 1e-5 for its updates)
TOP_L=${TOP_L:-20}
# none: the encoder alone orders BM25's top TOP_L, so what LUF learns is what is served;
# learned: train's default, which adds BM25's own score with a weight fitted before training.
INITIAL_PRIOR=${INITIAL_PRIOR:-none}
SECTIONS_A=${SECTIONS_A:-libs,libdevel,python,perl,haskell,java,javascript,golang,ruby,gnu-r,php,ocaml,doc,devel,lisp,rust,cli-mono,introspection,interpreters}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$OUT"
STORE="$OUT/shift.db"

# The domains' data folders: each holds the corpus (linked) and its own qa_train/qa_dev.
python3 - "$DATA" "$OUT" "$SECTIONS_A" "$SEED" "$N_A" "$CHUNK" "$CHUNKS" "$EVAL" <<'EOF'
import json, os, random, re, sys
data, out, sections, seed, n_a, chunk, chunks, n_eval = sys.argv[1:]
seed, n_a, chunk, chunks, n_eval = int(seed), int(n_a), int(chunk), int(chunks), int(n_eval)
in_a = set(sections.split(","))
section = {}
for line in open(os.path.join(data, "debian_corpus.jsonl")):
    d = json.loads(line)
    m = re.match(r"Section: ([^.]+)\.", d["text"])
    section[d["id"]] = m.group(1) if m else "?"
def rows(split, domain):
    out = [json.loads(l) for l in open(os.path.join(data, f"qa_{split}.jsonl"))]
    return [r for r in out if (section.get(r["gold_doc"], "?") in in_a) == (domain == "A")]
def folder(name, train, dev):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for f in ("debian_corpus.jsonl", "debian_meta.json"):
        link = os.path.join(d, f)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(data, f)), link)
    for split, rs in (("train", train), ("dev", dev)):
        with open(os.path.join(d, f"qa_{split}.jsonl"), "w") as fh:
            for r in rs:
                fh.write(json.dumps(r) + "\n")
rng = random.Random(seed)
a_train, a_dev = rows("train", "A"), rows("dev", "A")
b_train, b_dev = rows("train", "B"), rows("dev", "B")
for x in (a_train, a_dev, b_train, b_dev):
    rng.shuffle(x)
if len(b_train) < 200 + chunk * chunks:
    sys.exit(f"B has {len(b_train)} training questions: fewer than 200 held out + {chunks} x {chunk}")
a_sample = a_train[:n_a]
folder("A", a_sample, a_dev[:300])
held = b_train[:200]
for i in range(chunks):
    folder(f"B{i + 1}", b_train[200 + i * chunk: 200 + (i + 1) * chunk], held)
folder("B-eval", a_sample, b_dev[:n_eval])
print(f"domain A: {len(a_train)} train / {len(a_dev)} dev questions; B: {len(b_train)} / {len(b_dev)}; "
      f"M0 on {len(a_sample)}, {chunks} chunks of {chunk}, {min(n_eval, len(b_dev))} evaluation questions of B",
      file=sys.stderr)
EOF

train() {  # DATA_FOLDER INIT OUT LR
  # Done when its marker says complete (a run still going writes it with "complete": false).
  python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("complete", True) else 1)' \
    "$3/attune_model.json" 2>/dev/null && return 0
  $A train --method luf --data "$1" --task qa --init "$2" --llm "$JUDGE" --top-l "$TOP_L" --epochs "$EPOCHS" \
    --initial-prior "$INITIAL_PRIOR" --lr "$4" \
    --seed "$SEED" --store "$STORE" --out "$3" $([ -d "$3/checkpoint" ] && echo --resume) 2>&1 | tail -4
}
train "$OUT/A" "$ENC" "$OUT/M0" "$LR"
specs="bm25,rerank(bm25,$TOP_L,dense:$ENC),$OUT/M0"
for i in $(seq 1 "$CHUNKS"); do
  train "$OUT/B$i" "$OUT/M$((i - 1))" "$OUT/M$i" "$LR_UPDATE"
  specs="$specs,$OUT/M$i"
done
[ -f "$OUT/eval.json" ] || $A eval --data "$OUT/B-eval" --task qa --split dev --k 5 --llm reference --seed "$SEED" \
  --retrievers "$specs" --store "$STORE" --out "$OUT/eval.json" 2>&1 | tee "$OUT/eval.txt" | tail -12
# The same models on A's dev questions (the domain M0 was trained on), for the other side of the shift.
[ -f "$OUT/eval_A.json" ] || $A eval --data "$OUT/A" --task qa --split dev --k 5 --llm reference --seed "$SEED" \
  --retrievers "$specs" --store "$STORE" --out "$OUT/eval_A.json" 2>&1 | tee "$OUT/eval_A.txt" | tail -12
