#!/usr/bin/env bash
# The CUDA checks of train-lm and the local: reader, run on the lent GPU machine:
#   scripts/device/check-cuda.sh DEV OUT
# DEV holds debs/ (scripts/device/build-cuda.sh), data/commits.jsonl.gz
# (../shared/data/text/commits.jsonl, gzipped) and reader75q/ (docs/RESULTS.md's default
# reader, without its checkpoint). Everything it prints goes to OUT/check.log as well.
set -uo pipefail
DEV=$(cd "${1:?usage: check-cuda.sh DEV OUT}" && pwd)
OUT=$(mkdir -p "${2:?usage: check-cuda.sh DEV OUT}" && cd "$2" && pwd)
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/check.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%T))"; }

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nproc; g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'

step build
t0=$(date +%s)
ATTUNE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER= -DTORCH_CUDA_ARCH_LIST=9.0" \
  bash scripts/device/build-cuda.sh "$DEV/debs" build-cuda > "$OUT/build.log" 2>&1
rc=$?
echo "build rc $rc in $(( $(date +%s) - t0 )) s"
grep -E "error|Error|FAILED" "$OUT/build.log" | head -40
A=$PWD/build-cuda/tools/attune/attune
echo "libraries not found: $(ldd $A-torch | grep -c 'not found')"
[ -x "$A" ] && [ -x "$PWD/build-cuda/tools/attune/attune-torch" ] || { tail -30 "$OUT/build.log"; exit 1; }

W=/tmp/attune-check && rm -rf $W && mkdir -p $W
gunzip -c "$DEV/data/commits.jsonl.gz" > $W/commits.jsonl
R=$DEV/reader75q

step "score and generate: reader75q on cpu, cuda float32, cuda bfloat16"
P='Write the subject line of this commit. Previous commits of the author: "Fix typo in the manual". Commit:'
for d in "cpu float32" "cuda float32" "cuda bfloat16"; do
  set -- $d
  echo "-- $1 $2"
  timeout 120 $A score --llm local:$R --device $1 --dtype $2 --store $W/s.db --prompt "$P" --target " Fix a typo in the README" --quiet
  timeout 120 $A generate --llm local:$R --device $1 --dtype $2 --store $W/s.db --prompt "$P" --max-new-tokens 24 --quiet
done

step "default pretraining on all of commits.jsonl, cuda, bf16 autocast (the default on CUDA)"
timeout 600 $A train-lm --input $W/commits.jsonl --tokenizer $R --out $W/lm_bf16 --device cuda --log-every 200 2>&1 | grep -v "^\s*$" | tail -12

step "default pretraining, cuda, fp32"
timeout 600 $A train-lm --input $W/commits.jsonl --tokenizer $R --out $W/lm_fp32 --device cuda --precision fp32 --log-every 400 2>&1 | tail -6

step "bf16 refused on cpu"
$A train-lm --input $W/commits.jsonl --tokenizer $R --out $W/lm_cpu_bf16 --device cpu --precision bf16 --max-texts 100; echo "rc $?"

for p in bf16 fp32; do
  step "a 12-layer, 768-wide model (~95M parameters), 20,000 texts, seq 512, batch 32, cuda, $p"
  timeout 300 $A train-lm --input $W/commits.jsonl --tokenizer $R --out $W/big_$p --device cuda --precision $p \
    --max-texts 20000 --hidden 768 --layers 12 --heads 12 --kv-heads 12 --intermediate 2048 --seq-len 512 \
    --batch-size 32 --micro-batch 32 --log-every 10 2>&1 | tail -5
done

step "reader stage on cuda from the bf16 pretraining (commit tasks, defaults)"
timeout 600 $A train-lm --stage reader --init $W/lm_bf16 --input $W/commits.jsonl --tasks commit_subject,commit_area \
  --out $W/reader_bf16 --device cuda --log-every 200 2>&1 | tail -8
echo "-- the reader it made, on cuda"
timeout 120 $A generate --llm local:$W/reader_bf16 --device cuda --store $W/s.db --prompt "$P" --max-new-tokens 24 --quiet
step done
