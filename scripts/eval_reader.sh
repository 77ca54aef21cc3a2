#!/usr/bin/env bash
# Measures a reader from scripts/train_reader.sh against issue 15's quality targets
# (docs/RESULTS.md), in two phases, so that test is read once and only with choices made on
# dev:
#
#   bash scripts/eval_reader.sh dev  [READER]   # choose each task's decoding on dev
#   bash scripts/eval_reader.sh test [READER]   # then the test rows, with those decodings
#
# READER defaults to runs/reader/reader. Reports (attune eval --out JSON, and the tables) go
# to EVAL=$READER/../eval. The decodings are chosen by fixed rules, written down before any
# test row is read, and saved in $EVAL/choice.json:
#   - qa (target: BM25 top-5 exact match >= 0.3, a level): the decoding with the higher BM25
#     exact match on qa_dev.jsonl's questions 1,001-2,000 (qa has no test split; the target
#     is then read on questions 1-1,000);
#   - commit_subject (target: BM25 top-4 beats no retrieval at p < 0.05): the decoding whose dev
#     report gives BM25 over none the smaller paired-test p, among positive gains (until
#     2026-12-03 the larger gain; scripts/reader_choice.py holds the rules);
#   - commit_area: free decoding (its answers are area names).
#   A tie goes to free decoding. On 2 CPU cores the dev phase makes about 4,300 generations and
#   the test phase about 13,300 (the oracle's 8 a query): 9 and 20 minutes with the
#   default reader on a 2-core VM (2026-12-02, docs/RESULTS.md).
# GIT and DEBIAN name the datasets (default ../shared/data/git and ../shared/data/debian);
# a dataset that is not there is skipped, saying so. LIMIT=N evaluates the first N examples of
# each split only (a quick check of the pipeline, not the targets' numbers).
# scripts/compare_readers.py EVAL1 EVAL2 ... puts several readers' dev reports side by side (e.g. one
# recipe trained with several SEEDs): each row's mean, standard deviation and range over them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ATTUNE=${ATTUNE:-$ROOT/build/tools/attune/attune}
SHARED=${SHARED:-$ROOT/../shared}
GIT=${GIT:-$SHARED/data/git}
DEBIAN=${DEBIAN:-$SHARED/data/debian}
PHASE=${1:-}
READER=${2:-$ROOT/runs/reader/reader}
EVAL=${EVAL:-$(dirname "$READER")/eval}
case $PHASE in dev | test) ;; *) echo "usage: $0 dev|test [READER_DIR]" >&2; exit 2 ;; esac
[ -x "$ATTUNE" ] || { echo "no attune binary at $ATTUNE: run scripts/setup.sh first" >&2; exit 2; }
[ -f "$READER/config.json" ] || { echo "no reader at $READER (scripts/train_reader.sh makes one)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to read the reports" >&2; exit 2; }
mkdir -p "$EVAL"
L=local:$READER
LIMIT_ARGS=()
[ -z "${LIMIT:-}" ] || LIMIT_ARGS=(--limit "$LIMIT")

ev() {  # name, then attune eval's arguments; skipped when the report is there
  local name=$1
  shift
  if [ -f "$EVAL/$name.json" ]; then
    echo "== $name: $EVAL/$name.json is there, kept"
  else
    echo "== $name"
    "$ATTUNE" eval --llm "$L" "$@" "${LIMIT_ARGS[@]}" --out "$EVAL/$name.json.part" | tee "$EVAL/$name.txt"
    mv "$EVAL/$name.json.part" "$EVAL/$name.json"
  fi
}

# qa_dev.jsonl's questions 1,001-2,000 beside the corpus: the dev set the qa decoding is chosen on.
qa_sel() {
  local d=$EVAL/qa_sel
  if [ ! -f "$d/qa_dev.jsonl" ]; then
    mkdir -p "$d"
    for f in "$DEBIAN"/*; do
      case $(basename "$f") in qa_dev.jsonl) ;; *) ln -sf "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$d/" ;; esac
    done
    sed -n 1001,2000p "$DEBIAN/qa_dev.jsonl" >"$d/qa_dev.jsonl.part"
    mv "$d/qa_dev.jsonl.part" "$d/qa_dev.jsonl"
  fi
  echo "$d"
}

have_git() { [ -d "$GIT" ] || { echo "== no git dataset at $GIT: the commit tasks are skipped"; return 1; }; }
have_qa() { [ -f "$DEBIAN/qa_dev.jsonl" ] || { echo "== no Debian qa at $DEBIAN: qa is skipped"; return 1; }; }

if [ "$PHASE" = dev ]; then
  if have_qa; then
    QS=$(qa_sel)
    for dec in free copy; do
      ev qa_sel_$dec --data "$QS" --task qa --split dev --retrievers bm25 --k 5 --max-new-tokens 32 --decode $dec
    done
  fi
  if have_git; then
    for dec in free copy; do
      ev subject_dev_$dec --data "$GIT" --task commit_subject --split dev --retrievers none,bm25 --k 4 --max-new-tokens 48 --decode $dec
    done
    ev area_dev_free --data "$GIT" --task commit_area --split dev --retrievers none,bm25 --k 4 --max-new-tokens 16
  fi
  # The rules above, applied to the dev reports.
  python3 "$ROOT/scripts/reader_choice.py" "$EVAL"
  exit 0
fi

[ -f "$EVAL/choice.json" ] || { echo "no $EVAL/choice.json: run the dev phase first" >&2; exit 2; }
pick() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$EVAL/choice.json" "$1"; }
if have_qa; then
  QA_DEC=$(pick qa)
  [ -n "$QA_DEC" ] || { echo "choice.json names no qa decoding: run the dev phase with the Debian files" >&2; exit 2; }
  QA_LIMIT=(--limit 1000)
  [ -z "${LIMIT:-}" ] || QA_LIMIT=()
  ev qa_dev1000 --data "$DEBIAN" --task qa --split dev --retrievers none,bm25 --k 5 --max-new-tokens 32 "${QA_LIMIT[@]}" --decode "$QA_DEC"
fi
if have_git; then
  SUBJ_DEC=$(pick commit_subject)
  [ -n "$SUBJ_DEC" ] || { echo "choice.json names no commit_subject decoding: run the dev phase with the git dataset" >&2; exit 2; }
  for split in dev test; do
    ev subject_${split}_oracle --data "$GIT" --task commit_subject --split $split --retrievers bm25 --k 1 --oracle 8 --max-new-tokens 48 --decode "$SUBJ_DEC"
  done
  ev subject_test --data "$GIT" --task commit_subject --split test --retrievers none,bm25 --k 4 --max-new-tokens 48 --decode "$SUBJ_DEC"
  ev area_test --data "$GIT" --task commit_area --split test --retrievers none,bm25 --k 4 --max-new-tokens 16
fi
