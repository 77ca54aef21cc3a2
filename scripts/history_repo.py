#!/usr/bin/env python3
"""Rebuilds one project's history from ../shared/data/text/commits.jsonl as a real git
repository, for `attune import-git` where the machine has no network to clone it.

    python3 scripts/history_repo.py --repo util-linux/util-linux --out /tmp/util-linux

Each commit of that project becomes a commit with the anonymous author id as its name
(and id@anon.invalid as its email), the day's date at noon UTC plus its position (so that
same-day commits keep their order), the subject, a blank line and the description as its
message, and a one-line change to a file named after the subject's area. The file keeps
the first 80 words of each description, trailers already removed, so import-git's
description limits see what the original history would give them (shorter texts, no
trailers). Standard library and `git fast-import` only; the result is a normal
repository with a work tree.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "text",
                                                     "commits.jsonl"))
    ap.add_argument("--repo", required=True, help="the project, as commits.jsonl names it (e.g. redis/redis)")
    ap.add_argument("--out", required=True, help="a new folder for the repository")
    a = ap.parse_args()
    if os.path.exists(a.out):
        print(f"history_repo: {a.out} already exists", file=sys.stderr)
        return 2
    rows = []
    with open(a.commits, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["repo"] == a.repo:
                rows.append(r)
    if not rows:
        print(f"history_repo: no commits of {a.repo} in {a.commits}", file=sys.stderr)
        return 2
    subprocess.run(["git", "init", "-q", "-b", "main", a.out], check=True)
    stream = []
    per_day = {}
    for i, r in enumerate(rows):  # the file is sorted by date, then id
        day = datetime.datetime.strptime(r["date"], "%Y-%m-%d").replace(tzinfo=datetime.timezone.utc)
        n = per_day.get(r["date"], 0)
        per_day[r["date"]] = n + 1
        when = int(day.timestamp()) + 12 * 3600 + n
        msg = (r["subject"] + "\n\n" + r["text"] + "\n").encode("utf-8")
        area = r["subject"].split(":", 1)[0] if ":" in r["subject"] else "misc"
        area = "".join(c if c.isalnum() or c in "-_." else "_" for c in area)[:40] or "misc"
        body = (r["id"] + "\n").encode("utf-8")
        who = f'{r["author"]} <{r["author"]}@anon.invalid> {when} +0000'
        stream.append(b"commit refs/heads/main\n")
        stream.append(f"mark :{i + 1}\nauthor {who}\ncommitter {who}\n".encode())
        stream.append(f"data {len(msg)}\n".encode() + msg + b"\n")
        if i:
            stream.append(f"from :{i}\n".encode())
        stream.append(f"M 100644 inline {area}.txt\ndata {len(body)}\n".encode() + body + b"\n")
    subprocess.run(["git", "-C", a.out, "fast-import", "--quiet"], input=b"".join(stream), check=True)
    subprocess.run(["git", "-C", a.out, "checkout", "-q", "main"], check=True)
    print(f"history_repo: {len(rows)} commits of {a.repo} in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
