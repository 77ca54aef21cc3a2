#!/usr/bin/env bash
# A larger reader than the 2-core default, trained and evaluated on a lent GPU machine
# (issue 15; docs/RESULTS.md, "A larger reader on a GPU"):
#
#   scripts/device/reader-cuda.sh DEV OUT
#
# DEV holds debs/ (scripts/device/build-cuda.sh), tok8k/ (the default tokenizer: tokenizer.json
# and tokenizer_config.json) and data/ with gzipped copies of ../shared/data/text/commits.jsonl,
# the Debian files debian_corpus, factcheck_train and qa_dev, and the dev and test files of the
# git tasks commit_subject and commit_area. Every step runs under one deadline (BUDGET seconds
# from the start, default 540): a step that would not fit is cut, and what finished is kept in
# OUT (its log, with the two training summaries, and each eval's --out JSON: 8 files). The model itself stays on the machine (too large to return).
# SMOKE=1 runs the same steps tiny, on the CPU, with this checkout's build (a dry run).
set -uo pipefail
DEV=$(cd "${1:?usage: reader-cuda.sh DEV OUT}" && pwd)
OUT=$(mkdir -p "${2:?usage: reader-cuda.sh DEV OUT}" && cd "$2" && pwd)
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/reader.log") 2>&1
T0=$(date +%s)
BUDGET=${BUDGET:-540}
SMOKE=${SMOKE:-0}
left() { echo $((T0 + BUDGET - $(date +%s))); }
step() { echo; echo "=== $* (t = $(($(date +%s) - T0)) s, $(left) s left)"; }
run() {  # run a step within what is left of the budget, keeping 5 s for the rest
  local l; l=$(($(left) - 5))
  if [ "$l" -le 10 ]; then echo "skipped: the budget is spent"; return 124; fi
  timeout "$l" "$@"; local rc=$?
  [ $rc -eq 124 ] && echo "cut at the deadline"
  return $rc
}

if [ "$SMOKE" = 1 ]; then
  A=$PWD/build/tools/attune/attune DEVICE=cpu
  PRE=(--hidden 64 --layers 2 --heads 2 --kv-heads 2 --intermediate 128 --seq-len 128 --batch-size 8 --micro-batch 8)
  RDR=(--max-texts 40) LIMIT=4 SUBJ_LIMIT=4
else
  DEVICE=cuda
  step machine
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  step build
  ATTUNE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER= -DTORCH_CUDA_ARCH_LIST=9.0" \
    run bash scripts/device/build-cuda.sh "$DEV/debs" build-cuda > /tmp/build.log 2>&1
  echo "build rc $?"
  A=$PWD/build-cuda/tools/attune/attune
  [ -x "$A" ] || { grep -E "error|FAILED" /tmp/build.log | head -20; tail -20 /tmp/build.log; exit 1; }
  # ~30M parameters: 8 layers of 512, SwiGLU 1408, 512-token sequences, batch 32.
  PRE=(--hidden 512 --layers 8 --heads 8 --kv-heads 8 --intermediate 1408 --seq-len 512 --batch-size 32 --micro-batch 32 --lr 8e-4)
  RDR=(--max-texts commit_subject=5000,commit_area=5000,qa=0 --epochs 2)
  LIMIT=1000 SUBJ_LIMIT=0
fi

W=/tmp/attune-reader && rm -rf $W && mkdir -p $W/git/commit_subject $W/git/commit_area $W/debian
for f in "$DEV"/data/*.gz; do
  b=$(basename "$f" .gz)
  case $b in
    commit_subject__*) gunzip -c "$f" > "$W/git/commit_subject/${b#commit_subject__}" ;;
    commit_area__*) gunzip -c "$f" > "$W/git/commit_area/${b#commit_area__}" ;;
    commits.jsonl) gunzip -c "$f" > "$W/commits.jsonl" ;;
    *) gunzip -c "$f" > "$W/debian/$b" ;;
  esac
done
if [ "$SMOKE" = 1 ]; then  # small inputs, so that each file gives texts
  for f in $W/commits.jsonl $W/debian/debian_corpus.jsonl $W/debian/factcheck_train.jsonl; do
    head -n 3000 $f > $f.head && mv $f.head $f
  done
fi
ls -la $W $W/debian $W/git/*

step "pretraining on commits.jsonl and the Debian corpus (titles and texts)"
run $A train-lm --input $W/commits.jsonl --input $W/debian/debian_corpus.jsonl --tokenizer "$DEV/tok8k" --out $W/lm \
  --device $DEVICE --log-every 100 "${PRE[@]}"
echo "rc $?"
cat $W/lm/attune_train.json; echo

step "reader stage: commit_subject, commit_area and every SUPPORTS claim of factcheck_train as qa"
run $A train-lm --stage reader --init $W/lm --input $W/commits.jsonl --tasks commit_subject,commit_area,qa \
  --claims $W/debian/factcheck_train.jsonl --corpus $W/debian/debian_corpus.jsonl --out $W/reader \
  --device $DEVICE --log-every 100 "${RDR[@]}"
echo "rc $?"
cat $W/reader/attune_train.json; echo
[ -f $W/reader/model.safetensors ] || exit 1

L=(--llm local:$W/reader --device $DEVICE --dtype float32 --store $W/s.db --quiet)
oracle() {  # split: BM25's top-1 against the best and worst single document of its top 8
  step "commit_subject $1, k = 1, BM25 with the oracle over its top 8"
  run $A eval --data $W/git --task commit_subject --split $1 --retrievers bm25 --k 1 --oracle 8 --max-new-tokens 48 \
    --limit $SUBJ_LIMIT "${L[@]}" --out "$OUT/oracle_$1.json"
}
oracle test
step "qa dev, first $LIMIT, k = 5, none and BM25"
run $A eval --data $W/debian --task qa --split dev --retrievers none,bm25 --k 5 --max-new-tokens 32 --limit $LIMIT \
  "${L[@]}" --out "$OUT/qa_dev.json"
step "commit_subject dev and test, k = 4, none and BM25"
for s in dev test; do
  run $A eval --data $W/git --task commit_subject --split $s --retrievers none,bm25 --k 4 --max-new-tokens 48 \
    --limit $SUBJ_LIMIT "${L[@]}" --out "$OUT/subject_$s.json"
done
step "commit_area dev and test, k = 4, none and BM25"
for s in dev test; do
  run $A eval --data $W/git --task commit_area --split $s --retrievers none,bm25 --k 4 --max-new-tokens 16 \
    "${L[@]}" --out "$OUT/area_$s.json"
done
oracle dev
step done
