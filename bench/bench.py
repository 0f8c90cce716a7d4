"""Benchmark scenarios, measured as ratios against peers in the same run, runs interleaved.

Only stdlib and Debian's matplotlib; no figure is hard-coded: the Markdown is generated from
the JSON written in the same run."""
import argparse
import json
import os
import platform

import machine_costs
import mcp_scenarios
import oneshot


def write_md(res, path):
    lines = ["# mcp-sandbox benchmark results", "",
             f"Machine: {res['machine']['cpus']} CPUs, kernel {res['machine']['kernel']}, "
             f"load average at start {res['machine']['loadavg_start']}, at end "
             f"{res['machine']['loadavg_end']}. Mode: {res['mode']}. Generated from latest.json.",
             ""]
    if res.get("only"):
        lines += [f"Only these scenarios ran: {', '.join(res['only'])}.", ""]
    if "machine_costs" in res:
        lines += machine_costs.write_md(res["machine_costs"])
    if "cold_one_shot" in res:
        lines += cold_md(res["cold_one_shot"])
    lines += mcp_scenarios.write_md(res)
    with open(path, "w") as f:
        f.write("\n".join(lines))


def cold_md(c):
    lines = ["## 1. Cold one-shot: `print(1)` in a fresh isolated process", "",
             "| peer | median ms | p99 ms | min ms | max ms | ratio to bare python (median of "
             "pairwise ratios) | isolates |", "|---|---|---|---|---|---|---|"]
    for p in c["peers"]:
        name = p["name"] + (" (helper)" if p.get("role") == "helper" else "")
        if "not_run" in p:
            lines.append(f"| {name} | - | - | - | - | not run: {p['not_run']} | {p['isolates']} |")
        else:
            every = f" (n={p['n']}, one round in {p['every']})" if p.get("every", 1) > 1 else ""
            lines.append(f"| {name} | {p['median_ms']:.2f} | {p['p99_ms']:.2f} | "
                         f"{p['min_ms']:.2f} | {p['max_ms']:.2f} | {p['ratio_median']:.3f}{every} | "
                         f"{p['isolates']} |")
    s = c["engine_setup_us"]
    lines += ["", f"{c['rounds']} interleaved rounds. Engine setup, built on demand (clone until "
              f"the exec of the command, measured inside the program): median {s['median']:.0f} "
              f"us, min {s['min']:.0f}, p99 {s['p99']:.0f}, max {s['max']:.0f} (n={s['n']})."]
    if "pool_setup_us" in c:
        ps, h = c["pool_setup_us"], c["pool_handover_us"]
        lines += [f"The run pool's sandboxes: built (clone until armed) in {ps['median']:.0f} us "
                  f"at the median (min {ps['min']:.0f}, max {ps['max']:.0f}), before their run; "
                  f"a command's handover, from the pool into the sandbox until its exec, "
                  f"{h['median']:.0f} us (min {h['min']:.0f}, max {h['max']:.0f}; n={h['n']}). "
                  "After each pooled run the harness waits, untimed, until the pool has built "
                  "the sandbox that replaces the one used, so that the rebuild runs in no "
                  "peer's time."]
    lines += [""]
    if c.get("cgroup_base"):
        lines += [f"The OCI peers' cgroups are created under `{c['cgroup_base']}` (beneath this "
                  "process's own cgroup in every hierarchy) and removed afterwards."
                  + (" crun runs in a mount namespace where the cgroup2 mount is hidden (it "
                     "refuses this machine's hybrid v1+v2 layout); the helper row is the cost "
                     "of entering it." if c.get("crun_mount_namespace") else ""), ""]
    return lines


def chart(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if "cold_one_shot" not in res:
        return False
    ps = [p for p in res["cold_one_shot"]["peers"] if "not_run" not in p]
    ps.sort(key=lambda p: p["median_ms"])
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(ps) + 1.5))
    ax.barh([p["name"] for p in ps], [p["median_ms"] for p in ps],
            xerr=[[p["median_ms"] - p["min_ms"] for p in ps],
                  [p["max_ms"] - p["median_ms"] for p in ps]], color="#4477aa")
    for i, p in enumerate(ps):
        ax.text(p["median_ms"], i, f"  {p['ratio_median']:.2f}x", va="center")
    ax.set_xscale("log")
    ax.set_xlabel("ms (median, whiskers min..max; log scale); labels: ratio to bare python")
    ax.set_title("Cold one-shot print(1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


SCENARIOS = {
    # First, on a machine not yet busy with the scenarios' leftovers.
    "machine_costs": machine_costs.run,
    "cold_one_shot": lambda binary, quick: oneshot.run(binary, 12 if quick else 100),
    "warm_execution": mcp_scenarios.warm_execution,
    "time_to_ready": mcp_scenarios.time_to_ready,
    # Density before the HTTP throughput run, whose teardown would still be returning memory.
    "density": mcp_scenarios.density,
    "http_throughput": mcp_scenarios.http_throughput,
    "floods": mcp_scenarios.floods,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--only", default="",
                    help="comma-separated scenarios to run (default: all): " + ", ".join(SCENARIOS))
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    unknown = [s for s in only if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    os.makedirs(a.out, exist_ok=True)
    load0 = open("/proc/loadavg").read().split()[:3]
    res = {"mode": "quick" if a.quick else "full",
           "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                       "loadavg_start": " ".join(load0)}}
    binary = os.path.abspath(a.bin)
    if only:
        res["only"] = only
    for name, fn in SCENARIOS.items():
        if not only or name in only:
            res[name] = fn(binary, a.quick)
    res["machine"]["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump(res, f, indent=2)
    write_md(res, os.path.join(a.out, "latest.md"))
    chart(res, os.path.join(a.out, "cold_one_shot.png"))
    mcp_scenarios.charts(res, a.out)
    print(open(os.path.join(a.out, "latest.md")).read())


if __name__ == "__main__":
    main()
