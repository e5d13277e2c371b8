"""report.py — the runner's per-phase timing table and CSV.

Inputs: the per-step CSV the Rakefile writes at exit (phase, step, start, end; seconds since
rake started) and the runner's own measurements (pool start, stage-in/out, the whole rake
process). For each Montage phase the table shows how many steps ran, their summed duration
("busy": what the phase cost in CPU-slot time) and the span from its first step's start to its
last step's end ("span": with -j > 1 the phases overlap, so spans do not add up to the total).
"""
import csv
from collections import OrderedDict

PHASES = ["prepare", "project", "diff", "fit", "bgmodel", "background", "add", "viewer"]


def phase_rows(steps_csv):
    acc = OrderedDict((p, [0, 0.0, None, None]) for p in PHASES)
    with open(steps_csv) as f:
        for r in csv.DictReader(f):
            if r["phase"] == "prepare" and r["step"] == "tables":
                continue    # the enclosing timer of the three prepare steps
            a = acc.setdefault(r["phase"], [0, 0.0, None, None])
            s, e = float(r["start_s"]), float(r["end_s"])
            a[0] += 1
            a[1] += e - s
            a[2] = s if a[2] is None else min(a[2], s)
            a[3] = e if a[3] is None else max(a[3], e)
    return [(p, n, busy, (e - s) if n else 0.0) for p, (n, busy, s, e) in acc.items()]


def write(path, env, extra, steps_csv):
    """extra: list of (name, seconds) measured by the runner, e.g. stage-in, workflow."""
    rows = [(p, n, busy, span) for p, n, busy, span in phase_rows(steps_csv)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env", "phase", "steps", "busy_s", "span_s"])
        for p, n, busy, span in rows:
            w.writerow([env, p, n, f"{busy:.3f}", f"{span:.3f}"])
        for name, sec in extra:
            w.writerow([env, name, "", "", f"{sec:.3f}"])
    return rows


def table(env, rows, extra):
    out = [f"{'phase (' + env + ')':<22}{'steps':>7}{'busy s':>10}{'span s':>10}"]
    for p, n, busy, span in rows:
        out.append(f"{p:<22}{n:>7}{busy:>10.2f}{span:>10.2f}")
    for name, sec in extra:
        out.append(f"{name:<22}{'':>7}{'':>10}{sec:>10.2f}")
    return "\n".join(out)
