#!/usr/bin/env bash
# The default reader, the enc14 encoder and the paper-000 tables with that reader, made on a
# lent GPU machine in one call (issues 14 and 15; docs/RESULTS.md):
#
#   scripts/device/learn-cuda.sh DEV OUT
#
# DEV holds debs/ (`PACK=1 scripts/device/fetch-debs.sh DEV/debs`: what build-cuda.sh unpacks), data.tar.xz
# (../shared/data's git/, text/commits.jsonl and the Debian files: corpus, factcheck_train,
# qa_dev) and models.tar.xz (../shared/models/bert-base-uncased-vocab). The steps:
#   1. attune built against the machine's CUDA libtorch;
#   2. the default reader (`scripts/train_reader.sh`: the 8k tokenizer, the 5.3M-parameter LM,
#      the reader stage), and beside it the enc14 encoder (docs/RESULTS.md, "A longer-pretrained
#      starting encoder"), both with their CPU recipes, on CUDA;
#   3. both models into OUT as models.tar.part-* (split to fit what a call returns);
#   4. `scripts/experiment_git.sh` with that reader and encoder (SCHEDULE, default small), the
#      three git tasks side by side, each in its own folder and store;
#   5. every table, training summary (learning curves) and log into OUT/results.tar.xz.
# Every step runs under one deadline (BUDGET seconds from the start, default 540): a step that
# would not fit is cut, and what finished is kept. SMOKE=1 runs the same steps tiny, on the
# CPU, with this checkout's build (a dry run of the script before a lease).
set -uo pipefail
DEV=$(cd "${1:?usage: learn-cuda.sh DEV OUT}" && pwd)
OUT=$(mkdir -p "${2:?usage: learn-cuda.sh DEV OUT}" && cd "$2" && pwd)
cd "$(dirname "$0")/../.."
ROOT=$PWD
exec > >(tee "$OUT/learn.log") 2>&1
T0=$(date +%s)
BUDGET=${BUDGET:-540}
SMOKE=${SMOKE:-0}
SCHEDULE=${SCHEDULE:-small}
TASKS=${TASKS:-commit_subject commit_area commit_pick}
left() { echo $((T0 + BUDGET - $(date +%s))); }
step() { echo; echo "=== $* (t = $(($(date +%s) - T0)) s, $(left) s left)"; }
run() {  # run a step within what is left of the budget, keeping 25 s for packing the results
  local l; l=$(($(left) - 25))
  if [ "$l" -le 10 ]; then echo "skipped: the budget is spent"; return 124; fi
  timeout "$l" "$@"; local rc=$?
  [ $rc -eq 124 ] && echo "cut at the deadline"
  return $rc
}

W=/tmp/attune-learn && rm -rf $W && mkdir -p $W/shared/data $W/shared/models
if [ "$SMOKE" = 1 ]; then
  A=$ROOT/build/tools/attune/attune DEVICE=cpu
  ENC_OPTS=(--hidden 32 --layers 1 --heads 2 --max-length 64 --steps 4 --batch-size 8 --limit 300)
  LM_SIZE=(--hidden 32 --layers 1 --heads 2 --kv-heads 2 --intermediate 64 --seq-len 64 --batch-size 4 --micro-batch 4 --max-texts 400)
  export READER_EXAMPLES=commit_subject=20,commit_area=20,qa=20
  # the tiny reader gives every document the same utility, which the trainers refuse: the
  # dry run's tables read with `reference` instead
  EXP=(TRAIN_LIMIT=40 DEV_LIMIT=8 EVAL_LIMIT=6 EPOCHS=1 PEARL_Y0=p50)
  EXP_LLM=reference
  THREADS=1
else
  DEVICE=cuda
  step machine
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  step build
  ATTUNE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER= -DTORCH_CUDA_ARCH_LIST=9.0" \
    run bash scripts/device/build-cuda.sh "$DEV/debs" build-cuda > $W/build.log 2>&1
  echo "build rc $?"
  A=$ROOT/build-cuda/tools/attune/attune
  [ -x "$A" ] || { grep -E "error|FAILED" $W/build.log | head -20; tail -20 $W/build.log; cp $W/build.log "$OUT/"; exit 1; }
  ENC_OPTS=(--hidden 128 --layers 3 --heads 4 --max-length 128 --steps 2500 --batch-size 64)
  LM_SIZE=()
  EXP=()
  EXP_LLM=local:$W/reader/reader
  THREADS=5
fi
tar -C $W/shared/data -xJf "$DEV/data.tar.xz"
tar -C $W/shared/models -xJf "$DEV/models.tar.xz"
S=$W/shared/data
if [ "$SMOKE" = 1 ]; then  # small inputs, so that each file gives texts quickly
  for f in $S/text/commits.jsonl $S/debian/debian_corpus.jsonl $S/debian/factcheck_train.jsonl; do
    head -n 3000 $f > $f.head && mv $f.head $f
  done
fi
du -sh $S/* $W/shared/models/*

step "the default reader (scripts/train_reader.sh) and, beside it, enc14"
( export OMP_NUM_THREADS=$THREADS
  run $A pretrain-encoder --data $S/git --task commit_subject --add-source $S/debian:qa \
    --add-texts $S/text/commits.jsonl --tokenizer $W/shared/models/bert-base-uncased-vocab "${ENC_OPTS[@]}" \
    --seed 14 --out $W/enc14 --device $DEVICE --log-every 250 > $W/enc14.log 2>&1
  echo "enc14 rc $?" >> $W/enc14.log ) &
ENC_PID=$!
if [ "$SMOKE" = 1 ]; then
  # the script's stages with a tiny LM (train_reader.sh takes no size options but SIZE)
  $A train-tokenizer --input $S/text/commits.jsonl --vocab-size 600 --out $W/reader/tok8k --quiet &&
  run $A train-lm --input $S/text/commits.jsonl --tokenizer $W/reader/tok8k --out $W/reader/lm --device cpu "${LM_SIZE[@]}" --quiet &&
  run $A train-lm --stage reader --init $W/reader/lm --input $S/text/commits.jsonl --tasks commit_subject,commit_area,qa \
    --claims $S/debian/factcheck_train.jsonl --corpus $S/debian/debian_corpus.jsonl --max-texts "$READER_EXAMPLES" \
    --out $W/reader/reader --quiet
else
  run env ATTUNE=$A SHARED=$W/shared OUT=$W/reader DEVICE=cuda bash scripts/train_reader.sh
fi
echo "reader rc $?"
wait $ENC_PID
cat $W/enc14.log | grep -v "^step" | tail -5
for m in $W/reader/lm $W/reader/reader $W/enc14; do echo "$m:"; cat $m/attune_train.json 2>/dev/null | head -60; done
[ -f $W/reader/reader/model.safetensors ] && [ -f $W/enc14/model.safetensors ] || { echo "no models"; exit 1; }

step "the models into OUT"
# the folders without their checkpoints; split to fit what a call returns (16 MiB a file)
tar -C $W -cf - --exclude=checkpoint reader/tok8k reader/lm/attune_train.json reader/reader enc14 |
  split -b 15M - "$OUT/models.tar.part-"
ls -la "$OUT"

step "paper 000 with this reader ($SCHEDULE schedule): $TASKS, side by side"
pids=()
for T in $TASKS; do
  mkdir -p $W/p000/$T
  ( run env "${EXP[@]}" ATTUNE=$A SHARED=$W/shared DATA=$S/git OUT=$W/p000/$T TASKS=$T LLM=$EXP_LLM \
      MAX_NEW_TOKENS=48 ENC=$W/enc14 SCHEDULE=$SCHEDULE DEVICE=$DEVICE OMP_NUM_THREADS=$THREADS \
      bash scripts/experiment_git.sh > $W/p000/$T.log 2>&1
    echo "$T rc $?" >> $W/p000/$T.log ) &
  pids+=($!)
done
wait "${pids[@]}"  # (a bare wait would also wait for the tee above, which never ends)
for T in $TASKS; do echo "--- $T"; tail -4 $W/p000/$T.log; cat $W/p000/$T/$T/eval_test.txt 2>/dev/null; done

step "results into OUT"
( cd $W && find p000 \( -name '*.txt' -o -name '*.log' -o -name 'eval_*.json' -o -name 'attune_train.json' -o -name 'report.html' \) \
    -print0 | tar --null -T - -cf - enc14.log | xz -6 > "$OUT/results.tar.xz" )
ls -la "$OUT"
step done
