"""bench_report.py — workflows/bench's arithmetic and output: per-repetition ratios, medians,
CSV, Markdown and PNG.

A repetition is one run of every access path between two `local` runs; its baseline is the
mean of those two (they bracket the others, so a machine that speeds up or slows down during the
repetition moves the baseline with it). Every ratio is taken within one repetition (time /
baseline, and between two access paths, e.g. hook / fuse) and the figure quoted is the median
over repetitions, with the smallest and largest beside it: on a shared machine the spread says
how much one run can be trusted.
"""
import csv
import os
import statistics

ROWS = ["stage-in", "prepare", "project", "diff", "fit", "bgmodel", "background", "add",
        "viewer", "stage-out", "workflow"]


def schedule(envs, reps):
    """The run order: [(rep, env)], `local` opening each repetition and once more at the end;
    the other paths rotate so that none always runs first (or always right after local)."""
    others = envs[1:]
    order = []
    for r in range(reps):
        k = r % len(others) if others else 0
        order.append((r, "local"))
        order += [(r, e) for e in others[k:] + others[:k]]
    order.append((reps, "local"))
    return order


def baselines(runs, reps):
    """runs: {(rep, env): {phase: seconds}}. Each repetition's baseline: the mean of the local
    runs that open and close it (one of them if the other failed; None if both did)."""
    out = {}
    for r in range(reps):
        locs = [runs[(i, "local")] for i in (r, r + 1) if (i, "local") in runs]
        if locs:
            out[r] = {ph: statistics.mean(l.get(ph, 0.0) for l in locs) for ph in ROWS}
    return out


def spread(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def summarize(runs, envs, reps):
    """{(env, phase): {"s": (median, min, max), "ratio": (median, min, max) or None}} and
    {(a, b): (median, min, max)} of a/b's workflow time for each pair of non-local paths."""
    base = baselines(runs, reps)
    table = {}
    for env in envs:
        for ph in ROWS:
            secs, ratios = [], []
            for r in range(reps):
                t = runs.get((r, env), {}).get(ph)
                if t is None:
                    continue
                secs.append(t)
                b = base.get(r, {}).get(ph, 0.0)
                if env != "local" and b > 0.05:
                    ratios.append(t / b)
            if env == "local":
                secs = [base[r][ph] for r in base]
            table[(env, ph)] = {"s": spread(secs), "ratio": spread(ratios)}
    pairs = {}
    others = envs[1:]
    for i, a in enumerate(others):
        for b in others[i + 1:]:
            q = [runs[(r, a)]["workflow"] / runs[(r, b)]["workflow"] for r in range(reps)
                 if (r, a) in runs and (r, b) in runs and runs[(r, b)].get("workflow")]
            if q:
                pairs[(a, b)] = spread(q)
    return table, pairs


def write_runs_csv(path, runs, base):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rep", "env", "phase", "seconds", "baseline_s", "ratio"])
        for (r, env), phases in sorted(runs.items()):
            for ph in ROWS:
                if ph not in phases:
                    continue
                b = base.get(r, {}).get(ph) if env != "local" else None
                ratio = f"{phases[ph] / b:.4f}" if b and b > 0.05 else ""
                w.writerow([r + 1, env, ph, f"{phases[ph]:.3f}", f"{b:.3f}" if b else "", ratio])


def write_summary_csv(path, table, envs):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "env", "median_s", "min_s", "max_s", "ratio_median", "ratio_min",
                    "ratio_max"])
        for ph in ROWS:
            for env in envs:
                cell = table[(env, ph)]
                if not cell["s"]:
                    continue
                rat = cell["ratio"]
                w.writerow([ph, env] + [f"{v:.3f}" for v in cell["s"]] +
                           ([f"{v:.4f}" for v in rat] if rat else ["", "", ""]))


def fmt_ratio(rat, reps):
    if not rat:
        return "—"
    med, lo, hi = rat
    return f"{med:.2f}" if reps == 1 else f"{med:.2f} ({lo:.2f}–{hi:.2f})"


def markdown(table, pairs, envs, reps, header):
    cols = ["phase"] + [f"{e} s" for e in envs] + [f"{e}/local" for e in envs[1:]]
    lines = [header, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for ph in ROWS:
        cells = [f"**{ph}**" if ph == "workflow" else ph]
        cells += [f"{table[(e, ph)]['s'][0]:.2f}" if table[(e, ph)]["s"] else "—" for e in envs]
        cells += [fmt_ratio(table[(e, ph)]["ratio"], reps) for e in envs[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    if pairs:
        lines.append("")
        for (a, b), rat in pairs.items():
            lines.append(f"Workflow {a}/{b}, paired within each repetition: "
                         f"{fmt_ratio(rat, reps)}.")
    if reps > 1:
        lines.append("")
        lines.append(f"Seconds are medians over {reps} repetitions (local: of each repetition's "
                     "baseline); ratios are medians of the per-repetition ratios, min–max in "
                     "brackets.")
    return "\n".join(lines) + "\n"


def plot(path, runs, base, envs, reps):
    """One point per repetition and path: workflow time / that repetition's baseline."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, env in enumerate(envs[1:]):
        ys = [runs[(r, env)]["workflow"] / base[r]["workflow"] for r in range(reps)
              if (r, env) in runs and r in base and base[r]["workflow"] > 0]
        ax.scatter([i] * len(ys), ys, label=env, color=f"C{i}")
        if ys:
            ax.hlines(statistics.median(ys), i - 0.25, i + 0.25, color=f"C{i}")
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_xticks(range(len(envs) - 1), envs[1:])
    ax.set_ylabel("workflow time / local")
    ax.set_title(f"Montage, {reps} repetition(s); bar = median")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_all(out, runs, envs, reps, header):
    """Writes runs.csv, bench.csv, bench.md (and bench.png with matplotlib); returns the
    Markdown text."""
    base = baselines(runs, reps)
    table, pairs = summarize(runs, envs, reps)
    write_runs_csv(os.path.join(out, "runs.csv"), runs, base)
    write_summary_csv(os.path.join(out, "bench.csv"), table, envs)
    text = markdown(table, pairs, envs, reps, header)
    with open(os.path.join(out, "bench.md"), "w") as f:
        f.write(text)
    plot(os.path.join(out, "bench.png"), runs, base, envs, reps)
    return text
