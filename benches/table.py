#!/usr/bin/env python3
"""Markdown tables of the last `cargo bench --bench breaker` (and `--bench tower`, `--bench pool`) runs, from criterion's files.

Reads <criterion dir>/<group>/<bench>/new/{benchmark.json,estimates.json} and prints:

1. the peer scenarios (groups that hold `lazybreaker` and at least one peer), one table per
   bench binary: one row per scenario, the median ns per call of each implementation
   (lazybreaker's variants and references, such as `lazybreaker_instant_clock` or `bare`,
   beside it), the best peer, and the ratio of `lazybreaker`'s median to the best peer's
   (<= 1.00: at least as fast as the best peer);
2. the scenarios where several lazybreaker configurations meet the peers (groups without a
   plain `lazybreaker` bench, whose `lazybreaker_*` benches are the configurations, such as
   `ratio_windows_*`): each configuration's median, the best peer, and each configuration's
   ratio to it;
3. every other group (lazybreaker-only variants, floor references): one row per bench.

Groups that benches/breaker.rs, benches/tower.rs and benches/pool.rs no longer define (left in
the criterion dir by older runs) are shown only with --all.

The criterion dir is, in order: the first argument, $CRITERION_HOME, $CARGO_TARGET_DIR/criterion,
then target/criterion beside this script's crate. Python 3 standard library only.

A result older than the newest one of its group by more than --stale-after minutes
(default 10) is marked `*`: it is not from the group's last run (criterion keeps the files of
benches that a later, filtered run skipped, and of benches that no longer exist).
"""

import argparse
import json
import os
import sys
from pathlib import Path

SUBJECT = "lazybreaker"
PEERS = ["failsafe", "recloser", "breaker", "tower_resilience", "tower_p2c"]
# The groups of each bench binary, in the order it runs them; unknown groups follow, sorted.
BREAKER = [
    "closed_success_1t",
    "closed_success_2t",
    "open_rejected_1t",
    "open_rejected_2t",
    "half_open_rejected_1t",
    "closed_windows_1t",
    "closed_windows_2t",
    "policies_1t",
    "two_step_1t",
    "floor_1t",
    "floor_2t",
    "registry_1t",
    "registry_2t",
    "registry_scale_1t",
    "ratio_windows_success_1t",
    "ratio_windows_success_2t",
    "ratio_windows_1pct_1t",
]
TOWER = [
    "tower_closed_1t",
    "tower_closed_2t",
    "tower_open_1t",
    "tower_open_2t",
    "async_closed_1t",
    "async_open_1t",
    "owned_1t",
    "owned_2t",
]
POOL = [
    "pool_pick_1t",
    "pool_service_1t",
    "pool_scale_1t",
]
BINARIES = {"breaker": BREAKER, "tower": TOWER, "pool": POOL}
ORDER = BREAKER + TOWER + POOL


def criterion_dir(arg):
    if arg:
        return Path(arg)
    if os.environ.get("CRITERION_HOME"):
        return Path(os.environ["CRITERION_HOME"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def load(root):
    """{group: {bench: (median_ns, lower_ns, upper_ns, mtime)}}"""
    results = {}
    for estimates in sorted(root.glob("**/new/estimates.json")):
        new = estimates.parent
        try:
            meta = json.loads((new / "benchmark.json").read_text())
            median = json.loads(estimates.read_text())["median"]
        except (OSError, ValueError, KeyError) as e:
            print(f"skipping {new}: {e}", file=sys.stderr)
            continue
        group = meta.get("group_id")
        bench = meta.get("function_id") or meta.get("value_str") or ""
        if meta.get("function_id") and meta.get("value_str"):
            bench = f"{meta['function_id']}/{meta['value_str']}"
        ci = median["confidence_interval"]
        results.setdefault(group, {})[bench] = (
            median["point_estimate"],
            ci["lower_bound"],
            ci["upper_bound"],
            estimates.stat().st_mtime,
        )
    return results


def group_order(groups):
    known = [g for g in ORDER if g in groups]
    return known + sorted(g for g in groups if g not in ORDER)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="criterion output dir (default: target/criterion)")
    ap.add_argument("--ci", action="store_true", help="show each median's 95%% interval")
    ap.add_argument("--stale-after", type=float, default=10, metavar="MINUTES")
    ap.add_argument("--all", action="store_true", help="also show groups not in ORDER")
    args = ap.parse_args()

    root = criterion_dir(args.dir)
    results = load(root)
    if not results:
        sys.exit(f"no criterion results under {root}: run `cargo bench --bench breaker` first")
    newest = {g: max(r[3] for r in benches.values()) for g, benches in results.items()}
    stale = False

    def cell(g, r):
        nonlocal stale
        if r is None:
            return "–"
        text = f"{r[0]:.1f}"
        if args.ci:
            text += f" [{r[1]:.1f}, {r[2]:.1f}]"
        if newest[g] - r[3] > args.stale_after * 60:
            stale = True
            text += " *"
        return text

    order = group_order(results)
    unknown = [g for g in order if g not in ORDER]
    if unknown and not args.all:
        print(f"not shown (in neither bench file; --all shows them): {', '.join(unknown)}",
              file=sys.stderr)
        order = [g for g in order if g in ORDER]
    peer_groups = [
        g for g in order if SUBJECT in results[g] and any(p in results[g] for p in PEERS)
    ]
    def configs(g):
        return sorted(b for b in results[g] if b.startswith(SUBJECT + "_"))

    config_groups = [
        g
        for g in order
        if g not in peer_groups and configs(g) and any(p in results[g] for p in PEERS)
    ]
    other_groups = [g for g in order if g not in peer_groups and g not in config_groups]

    print(f"criterion medians, ns per call ({root})\n")
    # One peer table per bench binary, each with the columns its groups have; groups of
    # neither binary (shown with --all) come last.
    tables = [[g for g in peer_groups if g in groups] for groups in BINARIES.values()]
    tables.append([g for g in peer_groups if g not in ORDER])
    for table in (t for t in tables if t):
        variants = sorted(
            {b for g in table for b in results[g] if b != SUBJECT and b not in PEERS}
        )
        ours = [SUBJECT, *variants]
        peer_names = [p for p in PEERS if any(p in results[g] for g in table)]
        head = ["scenario", *ours, *peer_names, "best peer", f"{SUBJECT} / best peer"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for g in table:
            row = results[g]
            peers = [(row[p][0], p) for p in peer_names if p in row]
            best, best_name = min(peers)
            ratio = row[SUBJECT][0] / best
            cells = [g, *(cell(g, row.get(b)) for b in ours)]
            cells += [cell(g, row.get(p)) for p in peer_names]
            cells += [f"{best_name} {best:.1f}", f"{ratio:.2f}" + (" ✓" if ratio <= 1 else "")]
            print("| " + " | ".join(cells) + " |")
        print()
    if config_groups:
        ours = sorted({b for g in config_groups for b in configs(g)})
        peer_names = [p for p in PEERS if any(p in results[g] for g in config_groups)]
        head = ["scenario", *ours, *peer_names, "best peer", *(f"{b} / best" for b in ours)]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for g in config_groups:
            row = results[g]
            best, best_name = min((row[p][0], p) for p in peer_names if p in row)
            cells = [g, *(cell(g, row.get(b)) for b in ours)]
            cells += [cell(g, row.get(p)) for p in peer_names]
            cells.append(f"{best_name} {best:.1f}")
            for b in ours:
                ratio = row[b][0] / best if b in row else None
                cells.append("–" if ratio is None else f"{ratio:.2f}" + (" ✓" if ratio <= 1 else ""))
            print("| " + " | ".join(cells) + " |")
        print()
    if other_groups:
        print("| group | bench | median |")
        print("|---|---|---|")
        for g in other_groups:
            for bench, r in results[g].items():
                print(f"| {g} | {bench} | {cell(g, r)} |")
        print()
    if stale:
        print(
            f"`*`: more than {args.stale_after:g} minutes older than the newest result of its "
            "group: from an earlier run."
        )


if __name__ == "__main__":
    main()
