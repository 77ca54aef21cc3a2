#!/usr/bin/env bash
# Paper 002's Table 1 on the Debian tasks (docs/RESULTS.md, "Paper 002's table on the Debian
# tasks"): one IUM reranker for several agents (a task answered by a language model with k
# documents), against BM25, per agent and macro-averaged.
#
#   ENC=runs/g1/enc14 bash scripts/experiment_ium.sh
#   AGENTS=my_agents.json OUT=runs/ium2 ITERATIONS=2 bash scripts/experiment_ium.sh
#
# 1. Data: $DEBIAN (../shared/data/debian) with its dev split cut in two, since the official
#    test split is not in ../shared: the first DEV_N queries per task pick kept epochs ("dev"),
#    the next TEST_N are read once, at the end ("test"). The corpus and train splits are linked.
# 2. The relevance start, OUT/iu/iter-0: RELEVANCE_LIMIT qa training queries' gold passages
#    against the rest of BM25's top 32, no language model asked, with the first stage's order
#    as a learned prior (--ium-initial-prior learned; PRIOR=none for 002's reranker).
# 3. Offline IUM: ITERATIONS EM iterations for every agent (TRAIN_N training and DEV_N dev
#    queries each, feedback on the top 32), OUT/iu/iter-N.
# 4. The uRAG-like baseline (the same, every agent reads [UNK]: --ium-unk-fraction 1), OUT/urag.
# 5. Online IUM from iter-0: rounds of BATCH of TRAIN_N training queries per agent, OUT/online.
# 6. `attune eval --agents` on "test": BM25, the start, offline IUM, uRAG, online IUM (its last
#    round); each agent's table, then the macro table with pooled significance (OUT/table.txt;
#    SPLIT=dev writes OUT/table-dev.txt from the dev queries instead, to choose settings first).
# Every stage is skipped when its output is there (train resumes its own iterations and
# rounds), so a killed run continues. LR, BATCH_SIZE and BALANCE empty = attune's
# defaults (1e-5, 512, pooled).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ATTUNE=${ATTUNE:-$ROOT/build/tools/attune/attune}
SHARED=${SHARED:-$ROOT/../shared}
DEBIAN=${DEBIAN:-$SHARED/data/debian}
OUT=${OUT:-$ROOT/runs/ium}
ENC=${ENC:?set ENC to a BERT-vocabulary encoder folder (pretrain-encoder --tokenizer bert-base-uncased-vocab)}
AGENTS=${AGENTS:-}
DEV_N=${DEV_N:-100}
TEST_N=${TEST_N:-200}
TRAIN_N=${TRAIN_N:-200}
RELEVANCE_LIMIT=${RELEVANCE_LIMIT:-2000}
ITERATIONS=${ITERATIONS:-1}
BATCH=${BATCH:-100}
LR=${LR:-}
BATCH_SIZE=${BATCH_SIZE:-}
BALANCE=${BALANCE:-}
PRIOR=${PRIOR:-learned}
SEED=${SEED:-0}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-16}
SPLIT=${SPLIT:-test}

[ -x "$ATTUNE" ] || { echo "no attune binary at $ATTUNE: run scripts/setup.sh first" >&2; exit 2; }
[ -f "$DEBIAN/debian_corpus.jsonl" ] || { echo "no Debian data at $DEBIAN (set DEBIAN or SHARED)" >&2; exit 2; }
mkdir -p "$OUT/data"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUT/experiment.log" >&2; }
run() { log "$*"; "$@"; }

# 1. the data, dev cut in two
for f in debian_corpus.jsonl debian_meta.json qa_train.jsonl factcheck_train.jsonl slot_train.jsonl; do
  [ -e "$OUT/data/$f" ] || ln -s "$(cd "$DEBIAN" && pwd)/$f" "$OUT/data/$f"
done
for t in qa factcheck slot; do
  head -n "$DEV_N" "$DEBIAN/${t}_dev.jsonl" > "$OUT/data/${t}_dev.jsonl"
  sed -n "$((DEV_N + 1)),$((DEV_N + TEST_N))p" "$DEBIAN/${t}_dev.jsonl" > "$OUT/data/${t}_test.jsonl"
done
if [ -z "$AGENTS" ]; then
  AGENTS=$OUT/agents.json
  cat > "$AGENTS" <<'JSON'
{"agents": [{"name": "qa-reference", "task": "qa", "llm": "reference", "k": 5},
            {"name": "qa-first", "task": "qa", "llm": "planted:first", "k": 1},
            {"name": "slot-first", "task": "slot", "llm": "planted:first", "k": 1},
            {"name": "slot-library", "task": "slot", "llm": "planted:marker?word=library", "k": 1},
            {"name": "factcheck-first", "task": "factcheck", "llm": "planted:first", "k": 1}]}
JSON
fi

STORE=$OUT/iu.db
knobs=()
[ -n "$LR" ] && knobs+=(--lr "$LR")
[ -n "$BATCH_SIZE" ] && knobs+=(--batch-size "$BATCH_SIZE")
[ -n "$BALANCE" ] && knobs+=(--ium-balance "$BALANCE")
common=(--agents "$AGENTS" --data "$OUT/data" --task qa --store "$STORE" --seed "$SEED" --max-new-tokens "$MAX_NEW_TOKENS"
        --ium-initial-prior "$PRIOR")
offline=(--method ium --init "$ENC" --limit "$TRAIN_N" --dev-limit "$DEV_N" --ium-feedback-k 32 --ium-relevance-start
         --ium-relevance-limit "$RELEVANCE_LIMIT" --ium-iterations "$ITERATIONS" "${knobs[@]}")

# 2-3. the relevance start and offline IUM (each iteration a folder; a finished one is skipped)
run "$ATTUNE" train "${common[@]}" "${offline[@]}" --out "$OUT/iu"
# 4. uRAG-like, from the same start
[ -d "$OUT/urag/iter-0" ] || { mkdir -p "$OUT/urag" && cp -r "$OUT/iu/iter-0" "$OUT/urag/iter-0"; }
run "$ATTUNE" train "${common[@]}" "${offline[@]}" --ium-unk-fraction 1 --out "$OUT/urag"
# 5. online IUM, from the start
run "$ATTUNE" train "${common[@]}" --method ium-online --init "$OUT/iu/iter-0" --limit "$TRAIN_N" \
  --ium-online-batch "$BATCH" "${knobs[@]}" --out "$OUT/online"
rounds=$(( (TRAIN_N + BATCH - 1) / BATCH ))
# 6. the table: SPLIT=dev first to choose between settings, then test, read once
name=table; [ "$SPLIT" = test ] || name=table-$SPLIT
if [ ! -s "$OUT/$name.txt" ]; then
  q='?task={task}&model={llm}'
  R="bm25,rerank(bm25,100,ium:$OUT/iu/iter-0$q),rerank(bm25,100,ium:$OUT/iu/iter-$ITERATIONS$q)"
  R="$R,rerank(bm25,100,ium:$OUT/urag/iter-$ITERATIONS$q),rerank(bm25,100,ium:$OUT/online/{name}/round-$rounds$q)"
  run "$ATTUNE" eval --agents "$AGENTS" --data "$OUT/data" --split "$SPLIT" --oracle 20 --seed "$SEED" --store "$STORE" \
    --max-new-tokens "$MAX_NEW_TOKENS" --retrievers "$R" --list-overlap --out "$OUT/$name.json" > "$OUT/$name.txt.tmp"
  mv "$OUT/$name.txt.tmp" "$OUT/$name.txt"
fi
log "done: $OUT/$name.txt"
