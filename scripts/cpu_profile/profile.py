#!/usr/bin/env python3
"""Where each thread of a program spends its CPU time, where perf is absent (the GPU machines).

    profile.py record OUT -- COMMAND...     run COMMAND with sampler.c preloaded (built here
                                            with gcc); each process writes OUT.<pid>
    profile.py report OUT.<pid> BINARY [--top N] [--under REGEX]
                                            per thread: the functions its samples were in
                                            (self) and under (inclusive); --under: the
                                            share of each thread's samples with a frame
                                            matching REGEX

BINARY is the program with its symbols (an unstripped build of what ran: the device copies
are stripped); its functions are told apart with `nm`, other libraries only by name. A
thread that waits by spinning (CubeCL's device thread and its clients do) is sampled while
it spins: read a busy thread's "self" time in a spin loop as waiting.
"""

import argparse
import bisect
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The sampler's own two frames: its signal handler and the kernel's return trampoline.
SAMPLER_FRAMES = 2


def record(args):
    library = os.path.join(tempfile.mkdtemp(prefix="cpu-profile-"), "libsampler.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", library,
                    os.path.join(HERE, "sampler.c"), "-ldl", "-lrt", "-lpthread"], check=True)
    environment = dict(os.environ, LD_PRELOAD=library, SAMPLER_OUT=os.path.abspath(args.out))
    return subprocess.run(args.command, env=environment).returncode


def read_samples(path):
    """The process's mappings (start, end, file offset, file), samples (thread, pcs) and
    program's path."""
    maps, samples, program = [], [], None
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith("exe "):
                program = line[4:].strip()
            elif line.startswith("map "):
                fields = line[4:].split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                name = fields[5] if len(fields) > 5 else "[anon]"
                maps.append((start, end, int(fields[2], 16), name))
            elif line.startswith("s "):
                fields = line.split()
                pcs = [int(x, 16) for x in fields[3:]][SAMPLER_FRAMES:]
                samples.append((fields[2], pcs))
    return sorted(maps), samples, program


class Symbols:
    """Names for program counters: BINARY's functions through `nm`, other files by name."""

    def __init__(self, binary, maps, program):
        listing = subprocess.run(["nm", "-n", "-C", "--defined-only", binary],
                                 capture_output=True, text=True, check=True).stdout
        self.functions = []
        for line in listing.splitlines():
            fields = line.split(" ", 2)
            if len(fields) == 3 and fields[1] in "tTwW":
                self.functions.append((int(fields[0], 16), fields[2]))
        self.addresses = [address for address, _ in self.functions]
        self.maps = maps
        self.program = program
        self.base = min(start - offset for start, _, offset, name in maps if name == program)
        self.cache = {}

    def name(self, pc):
        if pc not in self.cache:
            self.cache[pc] = self.lookup(pc)
        return self.cache[pc]

    def lookup(self, pc):
        for start, end, _, name in self.maps:
            if start <= pc < end:
                if name != self.program:
                    return f"[{os.path.basename(name)}]"
                i = bisect.bisect_right(self.addresses, pc - self.base) - 1
                return re.sub(r"::h[0-9a-f]{16}$", "", self.functions[i][1]) if i >= 0 else "?"
        return "?"


def report(args):
    maps, samples, program = read_samples(args.samples)
    symbols = Symbols(args.binary, maps, program)
    threads = collections.defaultdict(list)
    for thread, pcs in samples:
        threads[thread].append([symbols.name(pc) for pc in pcs])
    print(f"{len(samples)} samples of {args.samples} ({symbols.program})")
    under = re.compile(args.under) if args.under else None
    for thread, stacks in sorted(threads.items(), key=lambda item: -len(item[1])):
        count = len(stacks)
        print(f"\n## {thread}: {count} samples ({100 * count / len(samples):.0f}%)")
        if under:
            matching = sum(any(under.search(f) for f in stack) for stack in stacks)
            print(f"under /{args.under}/: {100 * matching / count:.1f}%")
            continue
        leaves = collections.Counter(stack[0] for stack in stacks if stack)
        inclusive = collections.Counter(f for stack in stacks for f in set(stack))
        print("self:")
        for function, n in leaves.most_common(args.top):
            print(f"  {100 * n / count:5.1f}%  {function[:160]}")
        print("inclusive:")
        for function, n in inclusive.most_common(2 * args.top):
            print(f"  {100 * n / count:5.1f}%  {function[:160]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command_name", required=True)
    rec = commands.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("command", nargs=argparse.REMAINDER)
    rep = commands.add_parser("report")
    rep.add_argument("samples")
    rep.add_argument("binary")
    rep.add_argument("--top", type=int, default=20)
    rep.add_argument("--under")
    args = parser.parse_args()
    if args.command_name == "record":
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        sys.exit(record(args))
    report(args)


if __name__ == "__main__":
    main()
