#!/usr/bin/env bash
# attune's own neural reader, from nothing, on commit histories (issue 15; docs/RESULTS.md):
#
#   bash scripts/train_reader.sh                       # -> runs/reader/{tok8k,lm,reader}
#   COMMITS=my_commits.jsonl OUT=runs/mine bash scripts/train_reader.sh
#
# 1. a byte-level BPE tokenizer (8,192 tokens) on the commits' subjects and descriptions;
# 2. a 5.3M-parameter Llama-architecture LM pretrained on the same texts, each twice in a row
#    (REPEAT_SHARE=1: the second copy teaches it to copy from its context, which the readers
#    below need and which 6M tokens of commit messages never taught; 12M tokens, 1 epoch; PRETRAIN_TEXTS=N
#    pretrains on a seeded sample of N of them instead: two thirds of commits.jsonl's, 90,500, fit
#    a slow VM's 60 minutes but made a much worse reader, docs/RESULTS.md);
# 3. that LM fine-tuned as a retrieval-augmented reader on the prompts `attune eval` builds
#    for commit_subject and commit_area (per-author histories of COMMITS) and, when the
#    Debian files are there, qa (SUPPORTS claims of factcheck_train, passages of the corpus).
#    commit_pick is not in it: a reader of this size stayed at chance on it with 2,500 examples,
#    which cost about 4 minutes of the budget (docs/RESULTS.md). TASKS=... names other tasks.
#
# On a GPU (docs/RESULTS.md, "A larger reader on a GPU"): SIZE=large DEVICE=cuda trains a
# 30M-parameter model (8 layers of 512) on the commits and the Debian corpus, then the reader on
# every SUPPORTS claim of factcheck_train for 2 epochs: about 3 minutes on one H200, and the
# only reader here that reaches qa exact match 0.3. SIZE=large on a CPU would take many hours.
#
# COMMITS is JSONL in the layout of ../shared/data/text/commits.jsonl (id, repo, author,
# date, subject, text). Every stage is skipped when its folder is complete and resumes from
# its checkpoint when a run was killed, so running the script again continues it. The
# reader is `--llm local:$OUT/reader` for generate, score, feedback, eval and train.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ATTUNE=${ATTUNE:-$ROOT/build/tools/attune/attune}
SHARED=${SHARED:-$ROOT/../shared}
COMMITS=${COMMITS:-$SHARED/data/text/commits.jsonl}
DEBIAN=${DEBIAN:-$SHARED/data/debian}
OUT=${OUT:-$ROOT/runs/reader}
SEED=${SEED:-0}
VOCAB=${VOCAB:-8192}
READER_EXAMPLES=${READER_EXAMPLES:-}   # --max-texts of the reader stage: N or TASK=N,... (empty: train-lm's defaults)
READER_MODES=${READER_MODES:-}         # --reader-modes of the reader stage: M,... and/or TASK=M/M/... (empty: the defaults)
LENGTH_WINDOW=${LENGTH_WINDOW:-0}      # --length-window of the reader stage (0: off, the recipe's; 16: a 17% faster stage, not adopted: over 5 seeds its commit_area dev accuracy fell 0.0002 below its rule's floor, docs/RESULTS.md)
READER_LR=${READER_LR:-}               # --lr of the reader stage (empty: train-lm's 1e-3, the recipe's; 5e-4 was stopped after two seeds, not adopted, docs/RESULTS.md)
HEAD_WEIGHT=${HEAD_WEIGHT:-1}          # --head-weight of the reader stage: commit_subject's area counts N times in the loss (1: off)
ANSWER_PREFIX=${ANSWER_PREFIX:-}       # --answer-prefix of the reader stage, e.g. ANSWER_PREFIX=$'\n"' (empty: train-lm's newline, the recipe's)
LAYERS=${LAYERS:-}                     # --layers of pretraining (empty: train-lm's 4, the recipe's; 6 made a worse language model and reader in the same tokens, 48 minutes, docs/RESULTS.md); the reader stage keeps its language model's
SIZE=${SIZE:-default}                 # default (5.3M parameters, 2 CPU cores) or large (30M, for a GPU)
PRETRAIN_TEXTS=${PRETRAIN_TEXTS:-0}   # pretraining on a seeded sample of this many COMMITS texts (0 = all)
DEVICE=${DEVICE:-cpu}                 # train-lm --device: cpu, cuda, cuda:N
REPEAT_SHARE=${REPEAT_SHARE:-}         # train-lm --repeat-share of pretraining: this share of the texts twice in a row, to teach copying from the
                                       # context (empty: 1 for SIZE=default, the recipe's since 2026-12-04: over seeds 0-2 commit_subject's dev gain
                                       # from BM25 +0.023 at p < 0.01 each, against +0.015 without it, 46.5-50.6 min on the Xeon; 0 for SIZE=large, whose
                                       # recipe was measured without it; docs/RESULTS.md)
GROUP_BY=${GROUP_BY:-}                 # train-lm --group-by of pretraining: e.g. author packs each author's commits together, as BM25 neighbour chains (in-context pretraining: one run made a worse reader, docs/RESULTS.md; empty: file order, the recipe's)
PRECISION=${PRECISION:-auto}          # train-lm --precision of both stages: auto (fp32 on CPU, bf16 on CUDA), fp32, or bf16 (also on a CPU with avx512_bf16: pretraining 1.4x faster there, but its readers lost commit_area and qa accuracy, docs/RESULTS.md)
case $SIZE in
  default) PRE=() RDR=()
    [ -n "$REPEAT_SHARE" ] || REPEAT_SHARE=1 ;;
  large)
    PRE=(--hidden 512 --layers 8 --heads 8 --kv-heads 8 --intermediate 1408 --seq-len 512 --batch-size 32 --micro-batch 32 --lr 8e-4)
    RDR=(--epochs 2)
    [ -n "$READER_EXAMPLES" ] || READER_EXAMPLES=commit_subject=5000,commit_area=5000,qa=0
    [ -n "$REPEAT_SHARE" ] || REPEAT_SHARE=0 ;;
  *) echo "SIZE=$SIZE: expected default or large" >&2; exit 2 ;;
esac

[ -z "$LAYERS" ] || [ "$SIZE" = default ] || { echo "LAYERS=$LAYERS: only with SIZE=default (SIZE=$SIZE sets its own layers)" >&2; exit 2; }
[ -x "$ATTUNE" ] || { echo "no attune binary at $ATTUNE: run scripts/setup.sh first" >&2; exit 2; }
[ -f "$COMMITS" ] || { echo "no commits file at $COMMITS (set COMMITS=...)" >&2; exit 2; }
mkdir -p "$OUT"

# A stage is done when its folder has its marker: tokenizer.json for the tokenizer, and for a
# model the "seconds_this_run" that train-lm writes into attune_train.json when it finishes.
# A folder with a checkpoint and no marker is a killed run, continued with --resume.
run_stage() {  # name file pattern command...
  local name=$1 file=$2 pattern=$3
  shift 3
  if [ -f "$OUT/$name/$file" ] && grep -q "$pattern" "$OUT/$name/$file"; then
    echo "== $name: $OUT/$name is complete, skipped"
  elif [ -d "$OUT/$name/checkpoint" ]; then
    echo "== $name: resuming $OUT/$name"
    "$@" --resume
  else
    echo "== $name"
    rm -rf "${OUT:?}/$name"
    "$@"
  fi
}

run_stage tok8k tokenizer.json model "$ATTUNE" train-tokenizer --input "$COMMITS" --vocab-size "$VOCAB" --out "$OUT/tok8k"
PRE_INPUTS=(--input "$COMMITS")
SAMPLE=$PRETRAIN_TEXTS
# The large model also reads the Debian corpus (titles and texts; it holds no qa question).
if [ "$SIZE" = large ] && [ -f "$DEBIAN/debian_corpus.jsonl" ]; then
  PRE_INPUTS+=(--input "$DEBIAN/debian_corpus.jsonl")
  SAMPLE=$SAMPLE,0
fi
PRE_OPTS=()  # --group-by, --layers, --repeat-share
[ -z "$GROUP_BY" ] || PRE_OPTS=(--group-by "$GROUP_BY")
[ -z "$LAYERS" ] || PRE_OPTS+=(--layers "$LAYERS")
[ "$REPEAT_SHARE" = 0 ] || PRE_OPTS+=(--repeat-share "$REPEAT_SHARE")
run_stage lm attune_train.json seconds_this_run "$ATTUNE" train-lm "${PRE_INPUTS[@]}" --sample-texts "$SAMPLE" --tokenizer "$OUT/tok8k" \
  --out "$OUT/lm" --seed "$SEED" --device "$DEVICE" --precision "$PRECISION" "${PRE[@]}" "${PRE_OPTS[@]}"

TASKS=${TASKS:-commit_subject,commit_area}
QA=()
if [ -f "$DEBIAN/factcheck_train.jsonl" ] && [ -f "$DEBIAN/debian_corpus.jsonl" ]; then
  case ",$TASKS," in *,qa,*) ;; *) TASKS=$TASKS,qa ;; esac
  QA=(--claims "$DEBIAN/factcheck_train.jsonl" --corpus "$DEBIAN/debian_corpus.jsonl")
else
  echo "== no Debian files under $DEBIAN: the reader learns the commit tasks only"
fi
LIMIT=()
[ -z "$READER_EXAMPLES" ] || LIMIT=(--max-texts "$READER_EXAMPLES")
[ -z "$READER_MODES" ] || LIMIT+=(--reader-modes "$READER_MODES")
[ "$LENGTH_WINDOW" = 0 ] || LIMIT+=(--length-window "$LENGTH_WINDOW")
[ "$HEAD_WEIGHT" = 1 ] || LIMIT+=(--head-weight "$HEAD_WEIGHT")
[ -z "$ANSWER_PREFIX" ] || LIMIT+=(--answer-prefix "$ANSWER_PREFIX")
[ -z "$READER_LR" ] || LIMIT+=(--lr "$READER_LR")
run_stage reader attune_train.json seconds_this_run "$ATTUNE" train-lm --stage reader --init "$OUT/lm" --input "$COMMITS" \
  --tasks "$TASKS" "${QA[@]}" "${LIMIT[@]}" --out "$OUT/reader" --seed "$SEED" --device "$DEVICE" --precision "$PRECISION" "${RDR[@]}"

echo "the reader: --llm local:$OUT/reader"
