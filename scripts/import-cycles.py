#!/usr/bin/env python3
"""Fails on an import circle between files of one crate: the check that keeps every
crate's floor plan, as clippy's `too_many_lines` keeps functions short.

A file imports another when it names an item of the other's module: a `use` of it
(braces and globs expanded, `crate::`, `super::` and `self::` resolved) or a path
written inline in the code (`crate::fill::Fill`, or `coalesce::Fill` in a file that
declares `mod coalesce;`: a path whose first segment is a child module the file
declares names that child, `self::` or not). A `mod x;` declaration is not an
import; a re-export (`pub use x::Y` in a `mod.rs` or `lib.rs`) is followed to the file
that defines `Y`, so a folder's `mod.rs` that only declares and re-exports ties
nothing. Tests are left out: files under `tests/`, `tests.rs`, and the `#[cfg(test)]
mod` block at the end of a file (a test module imports whatever it tests).

    python3 scripts/import-cycles.py [ROOT]            # ROOT defaults to the repository
    python3 scripts/import-cycles.py --list [ROOT]     # every circle, also the allowed ones

Circles are strongly connected sets of files (Tarjan). The circles that existed when
the check was added are listed in scripts/import-cycles.allow, one per line as its
sorted files joined by spaces: a circle is allowed only if it is one of them or lies
inside one, so the list can only shrink (the check says when one is gone, to be
deleted from the list). Exit status: 0 = no new circle, 1 = a new or grown circle.
"""
import os
import re
import sys

USE_RE = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);', re.S | re.M)
INLINE_RE = re.compile(r'\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)')
# A path that starts a path (not a segment after `::`), for the ones whose first
# segment is a child module of the file: `coalesce::Fill` in the file that says
# `mod coalesce;`.
CHILD_INLINE_RE = re.compile(r'(?<![\w:])([a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)')
MOD_RE = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;', re.M)


def strip_comments_and_tests(text):
    """The file's code without comments, string contents and its trailing test module."""
    lines = text.split('\n')
    for i, line in enumerate(lines):
        if line.startswith('#[cfg(test)]') and i + 1 < len(lines) and lines[i + 1].startswith('mod '):
            lines = lines[:i]
            break
    text = '\n'.join(lines)
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (globs kept as `*`, `as` dropped)."""
    tree = re.sub(r'\s+as\s+\w+', '', tree)
    tree = re.sub(r'\s+', '', tree)
    if '{' not in tree:
        return [tree]
    head, rest = tree.split('{', 1)
    inner = rest[:rest.rfind('}')]
    parts, depth, cur = [], 0, ''
    for ch in inner:
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
            continue
        depth += ch == '{'
        depth -= ch == '}'
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for sub in expand_use(p):
            out.append(head + sub)
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}      # module path (tuple) -> file
        self.module_of = {}  # file -> module path
        self.reexports = {}  # module path -> {name: absolute path (tuple)}
        self.code = {}
        for d, _, fs in os.walk(src):
            if '/tests' in d[len(src):] or d.endswith('/tests'):
                continue
            for f in fs:
                if not f.endswith('.rs') or f == 'tests.rs':
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, src)[:-3].split(os.sep)
                if rel[-1] in ('lib', 'main') and len(rel) == 1:
                    module = ()
                elif rel[-1] == 'mod':
                    module = tuple(rel[:-1])
                else:
                    module = tuple(rel)
                self.files[module] = path
                self.module_of[path] = module
                with open(path, encoding='utf-8') as fh:
                    self.code[path] = strip_comments_and_tests(fh.read())
        # Only modules that their parent declares are part of the crate.
        for path, module in list(self.module_of.items()):
            if module and module[:-1] in self.files:
                parent = self.code[self.files[module[:-1]]]
                if module[-1] not in MOD_RE.findall(parent) and not re.search(
                        r'\bmod\s+' + module[-1] + r'\s*\{', parent):
                    del self.files[module]
                    del self.module_of[path]
        for module, path in self.files.items():
            names = {}
            for m in USE_RE.finditer(self.code[path]):
                if not m.group(0).lstrip().startswith('pub'):
                    continue
                for p in expand_use(m.group(1)):
                    segs = self.absolute(module, p.split('::'))
                    if segs and segs[-1] != '*':
                        names[segs[-1]] = segs
            self.reexports[module] = names

    def absolute(self, module, segs):
        """A path written in `module`, made absolute from the crate root (None outside it)."""
        segs = [s for s in segs if s]
        if not segs:
            return None
        if segs[0] == 'crate':
            return tuple(segs[1:])
        base = list(module)
        if segs[0] == 'self':
            segs = segs[1:]
        elif segs[0] == 'super':
            while segs and segs[0] == 'super':
                if not base:
                    return None
                base.pop()
                segs = segs[1:]
        elif segs[0] in {m[len(module)] for m in self.files if len(m) > len(module) and m[:len(module)] == module}:
            pass  # a child module named without self::
        else:
            return None
        return tuple(base) + tuple(segs)

    def target(self, segs, depth=0):
        """The file that defines what absolute path `segs` names."""
        for cut in range(len(segs), -1, -1):
            module = segs[:cut]
            if module in self.files:
                rest = segs[cut:]
                if rest and depth < 8 and rest[0] in self.reexports.get(module, {}):
                    again = self.reexports[module][rest[0]]
                    if again != segs:
                        return self.target(again + rest[1:], depth + 1)
                return self.files[module]
        return None

    def child_paths(self, module, code):
        """The inline paths of `module`'s code (its `use` items taken out: a segment
        inside one, `use quire_http::{key::X}`, is no path of its own) whose first
        segment is a child module it declares (`mod x;`, a file of the crate)."""
        children = {c for c in MOD_RE.findall(code) if module + (c,) in self.files}
        if not children:
            return []
        return [p for p in CHILD_INLINE_RE.findall(code) if p.split('::', 1)[0] in children]

    def edges(self):
        out = {path: set() for path in self.module_of}
        for path, module in self.module_of.items():
            code = self.code[path]
            paths = []
            for m in USE_RE.finditer(code):
                paths += expand_use(m.group(1))
            # Inline paths are read outside `use` items: a use tree is read whole
            # above, and its head alone (`crate::hostile` of
            # `use crate::hostile::{Env, Outcome}`) names nothing.
            body = USE_RE.sub(' ', code)
            paths += INLINE_RE.findall(body)
            paths += self.child_paths(module, body)
            for p in paths:
                segs = self.absolute(module, p.split('::'))
                if segs is None:
                    continue
                if segs and segs[-1] == '*':
                    segs = segs[:-1]
                t = self.target(segs)
                if t and t != path:
                    out[path].add(t)
        return out


def circles(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    list_all = '--list' in argv
    args = [a for a in argv if a != '--list']
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), '..'))
    allow_file = os.path.join(root, 'scripts', 'import-cycles.allow')
    allowed = []
    if os.path.exists(allow_file):
        with open(allow_file, encoding='utf-8') as fh:
            allowed = [set(l.split()) for l in fh if l.strip() and not l.startswith('#')]
    found = []
    crates_dir = os.path.join(root, 'crates')
    for name in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, name, 'src')
        if os.path.isdir(src):
            for comp in circles(Crate(src).edges()):
                found.append([os.path.relpath(p, root) for p in comp])
    new = [c for c in found if not any(set(c) <= a for a in allowed)]
    gone = [a for a in allowed if not any(set(c) <= a and set(c) for c in found)]
    for c in found if list_all else new:
        tag = 'NEW' if c in new else 'allowed'
        print(f'{tag} circle of {len(c)} files: {" ".join(c)}')
    for a in gone:
        print(f'gone (delete its line from scripts/import-cycles.allow): {" ".join(sorted(a))}')
    print(f'{len(found)} circles, {len(new)} new')
    return 1 if new else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
