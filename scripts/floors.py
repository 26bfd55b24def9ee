#!/usr/bin/env python3
"""Fails when a file imports from a floor above its own: the check that keeps a crate's
floor plan, beside scripts/import-cycles.py (which keeps its files free of circles).

A crate's floors are listed in scripts/floors.txt, from the lowest to the highest: each
is a folder under the crate's `src/` or a file at its root (named without `.rs`). A
file may import from its own floor and from any floor below it. The crate's wiring,
listed on the crate's `wired` line (its `lib.rs`, the shared state every floor is
handed), stands outside the order: anyone may import it and it may import anyone; the
import-cycles check is what keeps the parts it holds from importing it back. Imports
are found exactly as the import-cycles check finds them (`use`, inline `crate::`,
`super::` and `self::` paths, re-exports followed to the defining file; tests left out).

    python3 scripts/floors.py [ROOT]           # ROOT defaults to the repository
    python3 scripts/floors.py --list [ROOT]    # every upward import, also the allowed ones

The upward imports that existed when a crate's floors were drawn are listed in
scripts/floors.allow, one `FROM -> TO` pair of files a line; the list can only shrink:
the check names each line that no longer holds, to be deleted. Exit status: 0 = no new
upward import and every file on a floor, 1 otherwise.
"""
import importlib.util
import os
import sys


def load_cycles(root):
    path = os.path.join(root, 'scripts', 'import-cycles.py')
    spec = importlib.util.spec_from_file_location('import_cycles', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_plan(path):
    """{crate: (floors low to high, wired names)} from scripts/floors.txt."""
    plan = {}
    with open(path, encoding='utf-8') as fh:
        for line in fh:
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            head, _, names = line.partition(':')
            crate, _, kind = head.strip().partition(' ')
            floors, wired = plan.setdefault(crate, ([], []))
            (wired if kind.strip() == 'wired' else floors).extend(names.split())
    return plan


def floor_of(rel):
    """The floor a file lies on: its top folder under src/, or its own name at the root."""
    parts = rel.split(os.sep)
    return parts[0] if len(parts) > 1 else parts[0][:-3]


def upward(root, crate, floors, wired, cycles):
    """(unplaced files, upward imports) of one crate, paths relative to ROOT."""
    src = os.path.join(root, 'crates', crate, 'src')
    graph = cycles.Crate(src).edges()
    rank = {f: i for i, f in enumerate(floors)}
    unplaced, up = [], []
    for path in sorted(graph):
        here = floor_of(os.path.relpath(path, src))
        if here in wired:
            continue
        if here not in rank:
            unplaced.append(os.path.relpath(path, root))
            continue
        for target in sorted(graph[path]):
            there = floor_of(os.path.relpath(target, src))
            if there in wired:
                continue
            if there not in rank or rank[there] > rank[here]:
                up.append((os.path.relpath(path, root), os.path.relpath(target, root)))
    return unplaced, up


def main(argv):
    list_all = '--list' in argv
    args = [a for a in argv if a != '--list']
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), '..'))
    cycles = load_cycles(root)
    plan = read_plan(os.path.join(root, 'scripts', 'floors.txt'))
    allowed = set()
    allow_file = os.path.join(root, 'scripts', 'floors.allow')
    if os.path.exists(allow_file):
        with open(allow_file, encoding='utf-8') as fh:
            for line in fh:
                if line.strip() and not line.startswith('#'):
                    a, _, b = line.partition('->')
                    allowed.add((a.strip(), b.strip()))
    bad, found = 0, set()
    for crate, (floors, wired) in sorted(plan.items()):
        unplaced, up = upward(root, crate, floors, wired, cycles)
        for f in unplaced:
            print(f'NOT ON A FLOOR (add its floor to scripts/floors.txt): {f}')
            bad += 1
        for a, b in up:
            found.add((a, b))
            new = (a, b) not in allowed
            bad += new
            if new or list_all:
                print(f'{"NEW" if new else "allowed"} upward import: {a} -> {b}')
        print(f'{crate}: {len(floors)} floors, {len(up)} upward imports, '
              f'{sum(1 for e in up if e not in allowed)} new')
    for a, b in sorted(allowed - found):
        print(f'gone (delete its line from scripts/floors.allow): {a} -> {b}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
