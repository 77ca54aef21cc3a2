# For an eval report of commit_subject (none and bm25 rows): how often the output's area ("area:" prefix of at most 39
# characters before the first ':') equals the gold subject's, how often BM25's top-1 document's subject has the gold
# area, and the ROUGE-1 (rouge_score's tokenisation, which matches attune's to the last digit on these reports) of the
# bm25 row with its output's area replaced by the top-1 document's (an analysis: docs/RESULTS.md, "Where commit_subject's
# gain from retrieval is lost"). It also counts the easy cases: queries where at least 3 of BM25's top 4 documents share
# an area, how often that area is the gold one and how often the output begins with it (the reader's copy rate where
# copying is plainly right; docs/RESULTS.md, 2026-12-04). REPORT is `attune eval --task commit_subject --retrievers none,bm25 --out REPORT` on
# ../shared/data/git.
# Usage: python3 scripts/commit_subject_areas.py SPLIT REPORT.json [SHARED]   (SHARED: default ../shared beside the checkout)
import collections, json, os, re, sys
if len(sys.argv) < 3:
    sys.exit('usage: commit_subject_areas.py SPLIT REPORT.json [SHARED]')
split, report = sys.argv[1], sys.argv[2]
shared = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared')
def area(s):
    s = s.strip(); i = s.find(':'); return s[:i].strip().lower() if 0 < i < 40 else None
def toks(s): return [t for t in re.sub(r'[^a-z0-9]+', ' ', s.lower()).split() if t]
def r1(p, g):
    p, g = toks(p), toks(g)
    if not p or not g: return 0.0
    c = sum((collections.Counter(p) & collections.Counter(g)).values())
    return 0.0 if c == 0 else 2 * (c / len(p)) * (c / len(g)) / (c / len(p) + c / len(g))
base = os.path.join(shared, 'data', 'git', 'commit_subject', '')
if not os.path.isfile(base + split + '_outputs.json'):
    sys.exit(base + split + '_outputs.json: not found (give SHARED, the folder holding data/git)')
g = json.load(open(base + split + '_outputs.json')); g = g['golds'] if isinstance(g, dict) else g
gold = {x['id']: x['output'] for x in g}
qs = {q['id']: q for q in json.load(open(base + split + '_questions.json'))}
d = json.load(open(report))
if not all(r in d.get('per_example', {}) for r in ('none', 'bm25')):
    sys.exit(report + ': needs the per-example rows none and bm25 (attune eval --retrievers none,bm25 --out)')
for row in ['none', 'bm25']:
    pe = d['per_example'][row]
    hit = sum(1 for e in pe if area(gold[e['id']]) and area(e['output']) == area(gold[e['id']]))
    print(row, 'output area = gold area:', hit, 'of', sum(1 for e in pe if area(gold[e['id']])),
          'rouge-1', round(sum(r1(e['output'], gold[e['id']]) for e in pe) / len(pe), 4))
pe = d['per_example']['bm25']; top1 = 0; mod = []; easy = easy_gold = easy_copied = 0
for e in pe:
    prof = {p['id']: p for p in qs[e['id']]['profile']}
    shared_area = collections.Counter(a for a in (area(prof[r]['title']) for r in e['retrieved'][:4]) if a).most_common(1)
    if shared_area and shared_area[0][1] >= 3:
        easy += 1
        easy_gold += shared_area[0][0] == area(gold[e['id']])
        easy_copied += shared_area[0][0] == area(e['output'])
    top = prof.get(e['retrieved'][0]) if e['retrieved'] else None
    ta = area(top['title']) if top else None
    top1 += bool(ta and ta == area(gold[e['id']]))
    o = e['output'].strip(); i = o.find(':'); rest = o[i + 1:] if 0 < i < 40 else o
    mod.append(r1((top['title'].split(':')[0] + ': ' + rest.strip()) if ta else e['output'], gold[e['id']]))
print('top-1 document area = gold area:', top1, '; bm25 with the top-1 area put in: rouge-1', round(sum(mod) / len(mod), 4))
print('easy cases (>= 3 of the top 4 documents share an area):', easy, '; that area is the gold one:', easy_gold,
      '; the output begins with it:', easy_copied)
