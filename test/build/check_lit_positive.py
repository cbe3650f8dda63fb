#!/usr/bin/env python3
"""Every FileCheck prefix a lit test uses must have a positive check.

A prefix with only -NOT lines passes on any output that lacks those
strings: a module cut short, the wrong function, or a RUN line piped from
the wrong command satisfies "OFF-NOT: concat" as well as the right output
does (FileCheck refuses only input that is entirely empty). So each prefix that a
RUN line hands to FileCheck needs at least one line that must match
(PREFIX:, -NEXT, -SAME, -LABEL, -DAG, -COUNT-n or -EMPTY).

  check_lit_positive.py FILE_OR_DIR...     # exits 1 naming each bad prefix
"""
import os
import re
import shlex
import sys

LIT_SUFFIXES = (".mlir", ".test")
POSITIVE_KINDS = ("", "-NEXT", "-SAME", "-LABEL", "-DAG", "-EMPTY")


def run_lines(text):
    """The RUN commands of a lit file, continuation lines joined."""
    cmds, cur = [], ""
    for m in re.finditer(r"^\s*(?://|#|;)\s*RUN:(.*)$", text, re.MULTILINE):
        part = m.group(1).rstrip()
        if part.endswith("\\"):
            cur += part[:-1] + " "
            continue
        cmds.append(cur + part)
        cur = ""
    if cur:
        cmds.append(cur)
    return cmds


def filecheck_uses(cmd, path):
    """(check file, [prefixes]) of each FileCheck in one RUN command."""
    uses = []
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    for i, w in enumerate(words):
        if os.path.basename(w) != "FileCheck":
            continue
        prefixes, check_file = [], None
        j = i + 1
        while j < len(words) and words[j] not in ("|", "&&", "||", ";", "<", ">", "2>&1"):
            a = words[j]
            m = re.match(r"--?check-prefix(?:es)?=(.*)", a)
            if m:
                prefixes += m.group(1).split(",")
            elif a in ("--check-prefix", "-check-prefix", "--check-prefixes", "-check-prefixes"):
                j += 1
                prefixes += words[j].split(",")
            elif not a.startswith("-") and check_file is None:
                check_file = a
            j += 1
        check_file = (check_file or "%s").replace("%s", path).replace(
            "%S", os.path.dirname(path))
        uses.append((check_file, prefixes or ["CHECK"]))
    return uses


def has_positive(text, prefix):
    kinds = "|".join(re.escape(k) for k in POSITIVE_KINDS) + r"|-COUNT-\d+"
    return re.search(rf"(?<![\w-]){re.escape(prefix)}(?:{kinds}):", text) is not None


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def problems(path):
    text = read(path)
    out = []
    for cmd in run_lines(text):
        for check_file, prefixes in filecheck_uses(cmd, path):
            if not os.path.isfile(check_file):
                continue  # a file the test writes itself (%t): not ours to read
            checks = read(check_file)
            for p in prefixes:
                if not has_positive(checks, p):
                    out.append(f"{path}: FileCheck prefix {p} has no positive check (only "
                               f"{p}-NOT lines, or none): it passes on any output without those strings")
    return sorted(set(out))


def lit_files(args):
    for a in args:
        if os.path.isdir(a):
            for root, _, files in os.walk(a):
                if "Inputs" in root.split(os.sep):
                    continue
                for f in sorted(files):
                    if f.endswith(LIT_SUFFIXES):
                        yield os.path.join(root, f)
        else:
            yield a


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    files = list(lit_files(argv))
    bad = [p for f in files for p in problems(f)]
    for p in bad:
        print(p)
    print(f"{len(files)} lit files, {len(bad)} prefix(es) without a positive check")
    return 1 if bad or not files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
