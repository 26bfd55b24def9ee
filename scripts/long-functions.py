#!/usr/bin/env python3
"""Lists the functions longer than LIMIT raw lines (from the `fn` line to its closing
brace, blank lines and comments included), tests excluded: files under tests/,
tests.rs, and `#[cfg(test)] mod` blocks. A figure for a closing note; the rule itself is
clippy's `too_many_lines` (80 lines of code, see clippy.toml), which CI enforces.

    python3 scripts/long-functions.py ROOT [LIMIT]     # LIMIT defaults to 70
"""
import os, re, sys
root = sys.argv[1]; limit = int(sys.argv[2]) if len(sys.argv) > 2 else 70
fnre = re.compile(r'^(\s*)(pub(\([^)]*\))? )?(async )?(const )?(unsafe )?(extern "C" )?fn (\w+)')
out = []
for d, _, fs in os.walk(root):
    if '/tests' in d or '/target' in d or '/fuzz' in d or '/examples' in d or 'tools/' in d or '/benches' in d: continue
    for f in fs:
        if not f.endswith('.rs') or f == 'tests.rs': continue
        p = os.path.join(d, f); lines = open(p).read().split('\n')
        stop = len(lines)
        for i, l in enumerate(lines):
            if l.startswith('#[cfg(test)]') and i + 1 < len(lines) and lines[i+1].startswith('mod '):
                stop = i; break
        i = 0
        while i < stop:
            m = fnre.match(lines[i])
            if m and not lines[i].rstrip().endswith(';'):
                ind = m.group(1); j = i
                while j < stop and lines[j] != ind + '}' and not (j == i and lines[j].rstrip().endswith('}')): j += 1
                n = j - i + 1
                if n > limit: out.append((n, p.replace(root + '/', ''), m.group(8)))
            i += 1
for n, p, name in sorted(out, reverse=True): print(n, p, name)
print('total', len(out))
