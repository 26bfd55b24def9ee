#!/usr/bin/env python3
"""How often a repeat finds no recipe in the per-worker table of `http1::repeat`
because heads hashing to a full set push one another out: uniform requests over N
distinct heads, random 64-bit hashes, sets of 4 ways picked by the hash's low bits,
victims by its high bits (as `repeat::keep` picks them). Prints the share of
requests, after a warm-up, that miss, averaged over three seeds.

    python3 scripts/repeat-slots.py            # 4,096 / 8,192 / 16,384 slots
"""
import random


def miss_rate(heads, slots, ways=4, warm=100_000, reqs=400_000, seed=1):
    r = random.Random(seed)
    hashes = [r.getrandbits(64) for _ in range(heads)]
    nsets = slots // ways
    sets = [[None] * ways for _ in range(nsets)]
    miss = 0
    for i in range(warm + reqs):
        h = hashes[r.randrange(heads)]
        s = sets[h & (nsets - 1)]
        if h in s:
            continue
        if i >= warm:
            miss += 1
        if None in s:
            s[s.index(None)] = h
        else:
            s[(h >> 32) % ways] = h
    return miss / reqs


if __name__ == "__main__":
    print("slots  heads  repeats missed")
    for slots in (4096, 8192, 16384):
        for heads in (2000, 4000, 8000):
            m = sum(miss_rate(heads, slots, seed=s) for s in range(3)) / 3
            print(f"{slots:5}  {heads:5}  {100 * m:.2f} %")
