"""coopeval_montage — one run of the Montage workflow (workflows/Rakefile) on a Gfarm cluster,
its tasks spread over the client nodes, in one cache mode; used by bench-coop-montage and
bench-coop-hitrate.

Pwrake cannot be installed on this machine, so tasks are spread by the `rake -m` splitter: ONE
`rake -m -j1` PER NODE OVER A SHARED TASK LIST, inside the node's network namespace and on its
gfarm2fs mount. The workflow's phases run in order with a barrier between them; within a phase
the file tasks (p/*.fits, d/fit.*.txt, c/*.fits) are dealt round-robin to the nodes; the single
tasks (pimages.tbl, corrections.tbl, mosaic.png) run on c1. (When `pwrake` is on PATH it is
still not used: the runner says "rake -m splitter" in every CSV row.)

The input tiles are registered with no cache (in nobody's node cache) — on the lone gfsd in
config (a), round-robin over the clients' gfsds in config (b) (gfreg -h) — and every node cache
is emptied before the run, so each mode starts cold.
"""
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import coopeval_common as ce

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(ce.HERE)))
RAKEFILE = os.path.join(ROOT, "workflows", "Rakefile")
GEN_TILES = os.path.join(ROOT, "workflows", "gen-tiles")
CACHE = os.environ.get("CHFS_STACK_CACHE", os.path.expanduser("~/.cache/chfs-stack"))
RUNNER = "rake -m splitter"


def input_tiles(tiles, size, progress):
    """the cached synthetic input (workflows/gen-tiles), generated once per (tiles, size)"""
    d = os.path.join(CACHE, "montage-input", f"{tiles}x{size}-seed1")
    if not os.path.isdir(d) or not any(f.endswith(".fits") for f in os.listdir(d)):
        progress.log(f"generating {tiles} tiles of {size}^2 into {d}")
        tmp = d + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([GEN_TILES, tmp, "-n", str(tiles), "-s", str(size), "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        os.rename(tmp, d)
    names = sorted(f for f in os.listdir(d) if f.endswith(".fits"))
    return d, names, sum(os.path.getsize(os.path.join(d, f)) for f in names)


def _rake(c, node, workdir, targets, log_path, timeout):
    with open(log_path, "a") as log:
        subprocess.run(["nsenter", f"--net={c.netns(node)}", "--wd=" + workdir,
                        "rake", "-f", RAKEFILE, "-m", "-j1", *targets],
                       env=dict(os.environ, PROGRESS="0"), check=True, stdout=log,
                       stderr=subprocess.STDOUT, timeout=timeout)


def _fit_targets(workdir):
    """d/fit.A.B.txt of every overlap (diffs.tbl is written by the prepare phase)"""
    out = subprocess.run(["ruby", "-e", f"require '{ROOT}/workflows/lib/image_tables'; "
                          "ImageTables.rows('diffs.tbl').each { |r| "
                          "puts format('d/fit.%06d.%06d.txt', r['cntr1'].to_i, r['cntr2'].to_i) }"],
                         cwd=workdir, check=True, stdout=subprocess.PIPE, text=True).stdout
    return out.split()


def stage_input(c, config, input_dir, tiles, work):
    c.run("c1", ["gfmkdir", "-p", f"{work}/raw"], coop=False)
    nodes = ce.client_nodes(c)
    for i, f in enumerate(tiles):
        where = ["-h", ce.gfsd_host_of(c, nodes[i % len(nodes)])] if config == "b" else []
        c.run("c1", ["gfreg", *where, os.path.join(input_dir, f), f"{work}/raw/{f}"], coop=False)


def run(c, config, mode, rep, input_dir, tiles, tmp, progress, timeout=3600):
    """one workflow run; returns (phases [(name, s)], total s, counter deltas per node, mosaic
    path)"""
    nodes = ce.client_nodes(c)
    work = f"/wf-{config}-{mode}-{rep}"
    rakelog = os.path.join(tmp, f"rake-{config}-{mode}.log")
    mounts = c.mount(coop=ce.COOP_ARG[mode])
    try:
        stage_input(c, config, input_dir, tiles, work)
        ce.drop_caches(c)
        wd = {n: mounts[n] + work for n in nodes}
        before = ce.counters(c)
        phases = []

        def phase(name, targets_of):
            t0 = time.monotonic()
            with ThreadPoolExecutor(len(nodes)) as pool:
                futs = [pool.submit(_rake, c, n, wd[n], targets_of(i), rakelog, timeout)
                        for i, n in enumerate(nodes) if targets_of(i)]
                for f in futs:
                    f.result()
            phases.append((name, time.monotonic() - t0))

        share = lambda items: (lambda i: items[i::len(nodes)])  # noqa: E731
        t0 = time.monotonic()
        phase("prepare", lambda i: ["-n", "pimages.tbl"] if i == 0 else [])
        fits = _fit_targets(wd["c1"])
        phase("project", share([f"p/{f}" for f in tiles]))
        phase("diff+fit", share(fits))
        phase("bgmodel", lambda i: ["corrections.tbl"] if i == 0 else [])
        phase("background", share([f"c/{f}" for f in tiles]))
        phase("add+png", lambda i: ["mosaic.png"] if i == 0 else [])
        total = time.monotonic() - t0
        after = ce.counters(c)
        mosaic = os.path.join(tmp, f"mosaic-{config}-{mode}-{rep}.fits")
        shutil.copy(os.path.join(wd["c1"], "mosaic.fits"), mosaic)
        c.run("c1", ["gfrm", "-rf", work], coop=False)
    finally:
        c.umount()
    return phases, total, ce.counter_delta(before, after), mosaic
