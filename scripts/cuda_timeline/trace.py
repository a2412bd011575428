#!/usr/bin/env python3
"""A CUDA program's host and device timeline, where Nsight Systems is absent.

    trace.py record OUT.tsv -- COMMAND...   run COMMAND with timeline.c injected (built here
                                            with gcc against the CUDA toolkit's CUPTI)
    trace.py report OUT.tsv [--chrome F]    where the wall time went: the device's busy and
                                            idle time, its idle gaps by length and what the
                                            host was doing in the longest, each host
                                            thread's CUDA calls; --chrome writes the trace for
                                            Perfetto / chrome://tracing

The report's window is the steady part of the run: the stretch between module loads in
which the device was busiest (see steady_window); --from-s / --to-s (seconds after the
first device activity) choose another. --step-kernel REGEX splits it into steps at a
kernel launched once a step (the optimizer's) and gives a step's median wall and device
time. Works for cubenet and PyTorch alike (no profiler of PyTorch's is active).
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
# Device activity kinds (the rest are host-side driver calls and synchronizations).
DEVICE_KINDS = ("kernel", "memcpy", "memset")
# Idle gaps shorter than each bound, for the histogram (µs).
GAP_BUCKETS_US = (10, 50, 200, 1000, 10000, float("inf"))


def build_injection():
    """timeline.c compiled into a shared library in a temporary directory."""
    library = os.path.join(tempfile.mkdtemp(prefix="cuda-timeline-"), "libtimeline.so")
    command = ["gcc", "-O2", "-shared", "-fPIC", "-o", library,
               os.path.join(HERE, "timeline.c"), f"-I{CUDA}/include", f"-L{CUDA}/lib64",
               "-lcupti", f"-Wl,-rpath,{CUDA}/lib64"]
    subprocess.run(command, check=True)
    return library


def record(args):
    environment = dict(os.environ, CUDA_INJECTION64_PATH=build_injection(),
                       CUDA_TIMELINE_OUT=os.path.abspath(args.trace))
    return subprocess.run(args.command, env=environment).returncode


def read_trace(path):
    """The trace's records: (kind, start ns, end ns, where: gpuN/streamM or threadN, name)."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            kind, start, end, lane, name = line.rstrip("\n").split("\t", 4)
            records.append((kind, int(start), int(end), lane, name))
    return records


def union(intervals):
    """The sorted, merged intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def steady_window(records, args):
    """The window the report covers: --from-s/--to-s, else the stretch between two module
    loads (or a load and the trace's end) in which the device was busiest. Kernel
    compilation and autotuning load modules; a training run's later epochs load none, but
    its test pass, with its own batch shape, may load more after them."""
    device = [r for r in records if r[0] in DEVICE_KINDS]
    if not device:
        sys.exit("the trace has no device activity")
    first = min(r[1] for r in device)
    last = max(r[2] for r in device)
    if args.from_s is not None or args.to_s is not None:
        lo = first + int((args.from_s or 0) * 1e9)
        hi = first + int(args.to_s * 1e9) if args.to_s is not None else last
        return lo, hi, "chosen"
    loads = sorted(r[2] for r in records
                   if r[0] == "driver" and ("ModuleLoad" in r[4] or "LibraryLoad" in r[4]))
    bounds = [first] + [end for end in loads if first < end < last] + [last]
    busy = union((r[1], r[2]) for r in device)
    stretches = [(sum(e - s for s, e in clip(busy, a, b)), a, b) for a, b in zip(bounds, bounds[1:])]
    _, lo, hi = max(stretches)
    return lo, hi, "the busiest stretch without a module load"


def steps(records, pattern, lo, hi, busy):
    """The window's steps, each from one launch of a kernel matching `pattern` (one a
    training step: the optimizer's) to the next: their median period and device time."""
    marks = sorted(r[1] for r in records
                   if r[0] == "kernel" and lo <= r[1] < hi and re.search(pattern, r[4], re.I))
    periods = [(a, b) for a, b in zip(marks, marks[1:])]
    if not periods:
        return f"no kernel matches {pattern!r} twice in the window"
    lengths = sorted(b - a for a, b in periods)
    busy_each = sorted(sum(e - s for s, e in clip(busy, a, b)) for a, b in periods)
    median = lambda xs: xs[len(xs) // 2]
    return (f"{len(periods)} steps (marked by {pattern!r}): median {us(median(lengths)):.0f} µs a "
            f"step, of which the device was busy {us(median(busy_each)):.0f} µs "
            f"({100 * median(busy_each) / median(lengths):.0f}%)")


def us(ns):
    return ns / 1000.0


def report(args):
    records = read_trace(args.trace)
    lo, hi, how = steady_window(records, args)
    wall = hi - lo
    device = [(r[1], r[2]) for r in records if r[0] in DEVICE_KINDS]
    busy = union(clip(device, lo, hi))
    busy_ns = sum(e - s for s, e in busy)
    kernels = [r for r in records if r[0] == "kernel" and lo <= r[1] < hi]
    print(f"window ({how}): {wall / 1e6:.1f} ms; device busy {busy_ns / 1e6:.1f} ms "
          f"({100 * busy_ns / wall:.1f}%), {len(kernels)} kernels "
          f"(median {us(sorted(k[2] - k[1] for k in kernels)[len(kernels) // 2]) if kernels else 0:.1f} µs)")
    gpus = sorted({r[3].split("/")[0] for r in records if r[0] in DEVICE_KINDS})
    if len(gpus) > 1:
        each = [(gpu, union(clip([(r[1], r[2]) for r in records
                                  if r[0] in DEVICE_KINDS and r[3].startswith(gpu + "/")], lo, hi)))
                for gpu in gpus]
        print("busy on each GPU: " + ", ".join(
            f"{gpu} {100 * sum(e - s for s, e in spans) / wall:.1f}%" for gpu, spans in each))
    if args.step_kernel:
        print(steps(records, args.step_kernel, lo, hi, busy))
    dropped = [r for r in records if r[0] == "dropped"]
    if dropped:
        print(f"CUPTI dropped records: {', '.join(r[4] for r in dropped)}")

    # The device's idle gaps inside the window, by length.
    edges = [lo] + [x for s, e in busy for x in (s, e)] + [hi]
    gaps = [(edges[i], edges[i + 1]) for i in range(0, len(edges) - 1, 2) if edges[i + 1] > edges[i]]
    print("\ndevice idle gaps | count | total ms | share of the window")
    print("---|---|---|---")
    lower = 0
    for bound in GAP_BUCKETS_US:
        inside = [e - s for s, e in gaps if lower <= us(e - s) < bound]
        label = f"{lower:g}–{bound:g} µs" if bound != float("inf") else f"≥ {lower:g} µs"
        print(f"{label} | {len(inside)} | {sum(inside) / 1e6:.2f} | {100 * sum(inside) / wall:.1f}%")
        lower = bound

    # The longest gaps, with the host's CUDA calls in flight during each.
    host = [r for r in records if r[0] in ("driver", "sync")]
    launches = sorted(r for r in host if r[0] == "driver")
    print(f"\nthe {args.top} longest idle gaps (ms after the window's start): the host's CUDA calls during each")
    for start, end in sorted(gaps, key=lambda g: g[0] - g[1])[:args.top]:
        during = collections.Counter()
        for kind, s, e, lane, name in host:
            overlap = min(e, end) - max(s, start)
            if overlap > 0:
                during[(lane, name)] += overlap
        calls = ", ".join(f"{name} on {lane} {us(t):.0f} µs" for (lane, name), t in during.most_common(4))
        print(f"- {us(start - lo) / 1000:.2f} ms, {us(end - start):.0f} µs idle: {calls or 'no CUDA call'}"
              f"; {resumed_by(launches, start, end)}")

    # Each host thread's CUDA calls in the window.
    print("\nhost thread | CUDA calls | time in them | the largest")
    print("---|---|---|---")
    threads = collections.defaultdict(collections.Counter)
    counts = collections.Counter()
    for kind, s, e, lane, name in records:
        if kind == "driver" and lo <= s < hi:
            threads[lane][name] += e - s
            counts[lane] += 1
    for lane, names in sorted(threads.items(), key=lambda t: -sum(t[1].values())):
        largest = ", ".join(f"{n} {t / 1e6:.1f} ms" for n, t in names.most_common(3))
        print(f"{lane} | {counts[lane]} | {sum(names.values()) / 1e6:.1f} ms | {largest}")

    # The window in bins: how busy the device was in each (a training run's epochs show).
    bins = args.bins
    width = wall / bins
    shares = []
    for i in range(bins):
        a, b = lo + i * width, lo + (i + 1) * width
        shares.append(sum(e - s for s, e in clip(busy, a, b)) / width)
    print(f"\ndevice busy per {width / 1e6:.1f} ms bin: " + " ".join(f"{100 * x:.0f}" for x in shares))

    if args.chrome:
        write_chrome(records, args.chrome)
        print(f"\nChrome trace: {args.chrome}")


def resumed_by(calls, start, end):
    """Which thread's launch ended an idle gap, and how long that thread had been outside
    CUDA before it (host work the device waited for)."""
    launch = None
    for call in calls:
        if call[1] >= end:
            break
        if "Launch" in call[4] and call[2] <= end:
            launch = call
    if launch is None or launch[1] < start - 1_000_000:
        return "no launch before it ended"
    before = [c for c in calls if c[3] == launch[3] and c[2] <= launch[1]]
    outside = launch[1] - before[-1][2] if before else 0
    return (f"ended by a launch on {launch[3]}, {us(outside):.0f} µs after its previous CUDA "
            f"call ({before[-1][4] if before else 'none'})")


def write_chrome(records, path):
    """Each GPU's streams and the host's threads (and the waits on streams) as Chrome trace
    events (µs)."""
    events = []
    for kind, start, end, lane, name in records:
        if kind not in DEVICE_KINDS + ("driver", "sync"):
            continue
        process, _, track = lane.partition("/") if kind in DEVICE_KINDS else ("host", "", lane)
        events.append({"name": name, "ph": "X", "ts": us(start), "dur": us(end - start),
                       "pid": process, "tid": track})
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="action", required=True)
    rec = commands.add_parser("record", help="run a command with the timeline recorded")
    rec.add_argument("trace")
    rec.add_argument("command", nargs=argparse.REMAINDER)
    rep = commands.add_parser("report", help="where a recorded run's wall time went")
    rep.add_argument("trace")
    rep.add_argument("--from-s", type=float)
    rep.add_argument("--to-s", type=float)
    rep.add_argument("--top", type=int, default=8)
    rep.add_argument("--bins", type=int, default=40)
    rep.add_argument("--chrome")
    rep.add_argument("--step-kernel", help="a regex naming a kernel launched once a step")
    args = parser.parse_args()
    if args.action == "record":
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        if not args.command:
            parser.error("record needs a command after --")
        sys.exit(record(args))
    report(args)


if __name__ == "__main__":
    main()
