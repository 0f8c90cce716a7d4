"""What this machine charges for the operations a sandbox is made of (bench/platform, in C),
measured in the same run as the scenarios, so that a missed target can be read against them."""
import json
import os
import subprocess


def run(binary, quick):
    d = os.path.dirname(binary)
    argv = [os.path.join(d, "platform"), "--nolibc", os.path.join(d, "exit0-nolibc"),
            "--glibc-static", os.path.join(d, "exit0-static"),
            "--dynamic", os.path.join(d, "exit0-dynamic")]
    if quick:
        argv.append("--quick")
    r = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def write_md(m):
    def row(what, stat, unit, bounds):
        if not stat or "median" not in stat:
            why = stat.get("error", "not measured here") if stat else "not measured here"
            return f"| {what} | - | - | {why} |"
        return f"| {what} | {stat['median']:.1f} {unit} | {stat['min']:.1f} {unit} | {bounds} |"

    s, c = m["spawn_us"], m["clone_reaped_us"]
    lines = ["## 0. What this machine charges", "",
             "The operations every sandbox is made of, measured by `bench/platform` at the start "
             "of this run. bench/README.md says which target each one bounds.", "",
             "| operation | median | min | what it bounds |", "|---|---|---|---|",
             row("a syscall (getppid)", m["syscall_ns"], "ns",
                 "every call the server and the driver make"),
             row("a write fault on a fresh 4 KiB page", m["page_fault_ns"], "ns",
                 "the start of every process"),
             row("cpuid", m.get("cpuid_ns"), "ns",
                 "glibc's start-up asks it dozens of times (a trap on a virtual machine)"),
             row("a byte there and back between two processes", m["pipe_round_trip_us"], "us",
                 "each warm call: server to sandbox and back"),
             row("spawn and reap a program with no libc", s["static_no_libc"], "us",
                 "the kernel's share of starting a program"),
             row("the same, with glibc linked statically", s["static_glibc"], "us",
                 "`mcp-sandbox run` starts one glibc program more than bare python"),
             row("the same, with glibc linked dynamically", s["dynamic_glibc"], "us",
                 "python, bash and every other command"),
             row("fork, exit and reap", c["fork"], "us", "the sandbox's init and its command"),
             row("the same into a user namespace", c["user"], "us", "every sandbox"),
             row("the same into user + mount namespaces", c["user_mnt"], "us", "every sandbox"),
             row("the same into user + network namespaces", c["user_net"], "us", "every sandbox"),
             row("the same into user + pid namespaces", c["user_pid"], "us", "every sandbox"),
             row("the same into all seven namespaces", c["all"], "us",
                 "cold one-shot and setup: what every isolating peer pays too"),
             ""]
    return lines
