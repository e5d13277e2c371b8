#!/usr/bin/env python3
"""chfsload — write, verify and keep loading a CHFS pool through libchfs (ctypes), one process
per command, so tests and the rebalance benchmark can check every byte of many files quickly
(one process instead of one chfs-io per file) and run clients that keep working while the
pool's membership changes. The pool comes from the environment (CHFS_SERVER, CHFS_SECRET_FILE).

  chfsload.py write --out MANIFEST --files N --seed S [--top /t] [--size BYTES] [--big-every K]
      writes N files with pseudo-random content and records {path: [size, sha256]} in MANIFEST
      (JSON); --size gives every file that size, else sizes run from 0 to a few 64 KiB chunks
      and every K-th file (default 20) is over 1 MiB.
  chfsload.py verify MANIFEST...
      reads every file of the manifests and prints JSON {"ok": n, "failed": [[path, errno
      name]], "wrong": [[path, why]], "slowest_failure_s": s}; wrong means readable but not
      the recorded bytes (short, long or other content: stale or lost data); s is the
      longest time one failing read took.
  chfsload.py worker --manifest M --top /w0 --seed S --out RESULT [--rate-log FILE] [--ops R]
      prints "ready" once it has joined the pool, then until SIGTERM writes a new file (or a
      new version of one of its own), then reads and verifies a random file of M or of its
      own, alternately; every error is recorded with its time. At exit RESULT holds {"ops",
      "bytes_read", "bytes_written", "errors", "files": {path: [size, sha256]}} (the files it
      wrote, latest versions).
      --rate-log appends "time bytes_read bytes_written ops errors" every 0.25 s (cumulative);
      --ops paces it to at most R operations a second; --rewrite F sets the fraction of
      writes that make a new version of an own file (default 0.25).
  chfsload.py churn --dir D --prefix P --out RESULT
      prints "ready", then until SIGTERM creates D/P<i> and removes D/P<i-32> (so a directory
      being listed keeps changing); RESULT holds {"ops": n, "errors": [...]}.

As a module: write(), verify(), Workers and Churn run those commands against a pool's environment.
"""
import argparse
import ctypes
import errno
import hashlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time

from chfsutil import python_env

CHUNK = 65536
# Sizes of the mixed profile: empty, tiny, around the chunk size, a few chunks.
SMALL_SIZES = [0, 1, 4095, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 17, 200_000, 300_001]


class ChfsError(OSError):
    pass


class Client:
    """The few libchfs calls the load needs; each raises ChfsError(errno, path) on failure."""

    def __init__(self):
        self.lib = ctypes.CDLL("libchfs.so.3", use_errno=True)
        lib = self.lib
        lib.chfs_create.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_uint]
        lib.chfs_open.argtypes = [ctypes.c_char_p, ctypes.c_int32]
        lib.chfs_pwrite.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
        lib.chfs_pwrite.restype = ctypes.c_ssize_t
        lib.chfs_pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
        lib.chfs_pread.restype = ctypes.c_ssize_t
        lib.chfs_mkdir.argtypes = [ctypes.c_char_p, ctypes.c_uint]
        if lib.chfs_init(None) != 0:
            self._fail("chfs_init")
        self.buf = ctypes.create_string_buffer(1 << 20)

    @staticmethod
    def _fail(what):
        e = ctypes.get_errno()
        raise ChfsError(e, f"{what}: {os.strerror(e)}", what)

    def mkdir(self, path):
        if self.lib.chfs_mkdir(path.encode(), 0o755) != 0 and ctypes.get_errno() != errno.EEXIST:
            self._fail(path)

    def put(self, path, data):
        fd = self.lib.chfs_create(path.encode(), os.O_WRONLY | os.O_TRUNC, 0o644)
        if fd < 0:
            self._fail(path)
        try:
            off = 0
            while off < len(data):
                piece = data[off:off + (1 << 20)]
                n = self.lib.chfs_pwrite(fd, piece, len(piece), off)
                if n <= 0:
                    self._fail(path)
                off += n
        finally:
            if self.lib.chfs_close(fd) != 0:
                self._fail(path)

    def unlink(self, path):
        if self.lib.chfs_unlink(path.encode()) != 0:
            self._fail(path)

    def get(self, path):
        fd = self.lib.chfs_open(path.encode(), os.O_RDONLY)
        if fd < 0:
            self._fail(path)
        parts, off = [], 0
        try:
            while True:
                n = self.lib.chfs_pread(fd, self.buf, len(self.buf), off)
                if n < 0:
                    self._fail(path)
                if n == 0:
                    break
                parts.append(self.buf.raw[:n])
                off += n
        finally:
            self.lib.chfs_close(fd)
        return b"".join(parts)


def content(seed, path, size):
    return random.Random(f"{seed}:{path}").randbytes(size)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def mixed_size(i, big_every):
    if big_every and i % big_every == big_every - 1:
        return (1 << 20) + 4096 * (i % 64) + 123  # over 1 MiB, 17+ chunks
    return SMALL_SIZES[i % len(SMALL_SIZES)]


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def check(client, path, size, digest):
    """None if path reads as exactly the recorded bytes, else (kind, detail)."""
    try:
        got = client.get(path)
    except ChfsError as e:
        return "failed", errname(e)
    if len(got) != size:
        return "wrong", f"{len(got)} bytes, expected {size}"
    if sha(got) != digest:
        return "wrong", "other content"
    return None


def cmd_write(a):
    c = Client()
    c.mkdir(a.top)
    ndirs = min(a.files, 8)
    for d in range(ndirs):
        c.mkdir(f"{a.top}/d{d}")
    manifest = {}
    for i in range(a.files):
        path = f"{a.top}/d{i % ndirs}/f{i}"
        data = content(a.seed, path, a.size if a.size is not None else mixed_size(i, a.big_every))
        c.put(path, data)
        manifest[path] = [len(data), sha(data)]
    with open(a.out + ".tmp", "w") as f:
        json.dump(manifest, f)
    os.replace(a.out + ".tmp", a.out)
    print(f"chfsload: wrote {len(manifest)} files, {sum(s for s, _ in manifest.values())} bytes",
          file=sys.stderr)


def cmd_verify(a):
    c = Client()
    out = {"ok": 0, "failed": [], "wrong": [], "slowest_failure_s": 0.0}
    for m in a.manifests:
        with open(m) as f:
            files = json.load(f)
        if "files" in files and isinstance(files["files"], dict):  # a worker's result
            files = files["files"]
        for path, (size, digest) in sorted(files.items()):
            t = time.monotonic()
            r = check(c, path, size, digest)
            if r is None:
                out["ok"] += 1
            else:
                out[r[0]].append([path, r[1]])
                if r[0] == "failed":
                    out["slowest_failure_s"] = max(out["slowest_failure_s"], time.monotonic() - t)
    json.dump(out, sys.stdout)
    print()


def cmd_worker(a):
    with open(a.manifest) as f:
        known = {p: tuple(v) for p, v in json.load(f).items()}
    c = Client()
    # After loading libchfs: a library libfabric loads (PSM) installs its own SIGTERM handler.
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    rng = random.Random(a.seed)
    own, errors = {}, []
    st = {"ops": 0, "bytes_read": 0, "bytes_written": 0}
    rate = open(a.rate_log, "a") if a.rate_log else None
    last = 0.0
    c.mkdir(a.top)
    print("ready", flush=True)
    i = 0
    t0 = time.time()
    while not stop:
        t = time.time()
        if a.ops and i > a.ops * (t - t0):
            time.sleep(min(0.05, i / a.ops - (t - t0)))
            continue
        if i % 2 == 0:
            # A new file, or (one write in four) a new version of one of its own: a read of
            # the old bytes afterwards would be stale data.
            rewrite = own and rng.random() < a.rewrite
            path = rng.choice(list(own)) if rewrite else f"{a.top}/f{i // 2}"
            size = a.size if a.size is not None else SMALL_SIZES[rng.randrange(len(SMALL_SIZES))]
            data = content(f"{a.seed}.{i}", path, size)
            try:
                c.put(path, data)
                own[path] = (size, sha(data))
                st["bytes_written"] += size
            except ChfsError as e:
                errors.append([round(t, 3), "write", path, errname(e)])
                own.pop(path, None)  # a failed (re)write leaves the file's content undefined
        else:
            pool = own if own and rng.random() < 0.3 else known
            path = rng.choice(list(pool)) if pool else None
            if path:
                size, digest = pool[path]
                r = check(c, path, size, digest)
                if r:
                    errors.append([round(t, 3), "read", path, f"{r[0]}: {r[1]}"])
                else:
                    st["bytes_read"] += size
        st["ops"] += 1
        i += 1
        if rate and time.time() - last >= 0.25:
            last = time.time()
            print(f"{last:.3f} {st['bytes_read']} {st['bytes_written']} {st['ops']} {len(errors)}",
                  file=rate, flush=True)
    res = dict(st, errors=errors, files={p: list(v) for p, v in own.items()})
    with open(a.out + ".tmp", "w") as f:
        json.dump(res, f)
    os.replace(a.out + ".tmp", a.out)


def cmd_churn(a):
    c = Client()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("ready", flush=True)
    ops, errors = 0, []
    while not stop:
        try:
            c.put(f"{a.dir}/{a.prefix}{ops}", b"")
            if ops >= 32:
                c.unlink(f"{a.dir}/{a.prefix}{ops - 32}")
        except ChfsError as e:
            errors.append([ops, errname(e)])
        ops += 1
    with open(a.out + ".tmp", "w") as f:
        json.dump({"ops": ops, "errors": errors}, f)
    os.replace(a.out + ".tmp", a.out)


def _run(env, *args, timeout=300):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), *map(str, args)], env=python_env(env),
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"chfsload {args[0]} failed: {r.stderr.strip()[-2000:]}")
    return r


def write(env, out, files, seed, top="/t", size=None, big_every=20, timeout=300):
    """Write files into the pool of env (see `write` above); returns the manifest dict."""
    extra = (["--size", size] if size is not None else []) + ["--big-every", big_every]
    _run(env, "write", "--out", out, "--files", files, "--seed", seed, "--top", top, *extra,
         timeout=timeout)
    with open(out) as f:
        return json.load(f)


def verify(env, *manifests, timeout=300):
    """{"ok": n, "failed": [[path, errno name]], "wrong": [[path, why]]} for the manifests."""
    return json.loads(_run(env, "verify", *manifests, timeout=timeout).stdout)


class Workers:
    """k `worker` processes (tops /w0.. under workdir's names) loading the pool of env while a
    test changes the membership. Started ready (joined); stop() ends them (SIGTERM) and returns
    their results; leaving the with-block kills any still running."""

    def __init__(self, env, manifest, workdir, k=2, ops=None, size=None, rate_logs=False,
                 rewrite=None):
        self.outs = [os.path.join(workdir, f"worker{i}.json") for i in range(k)]
        self.rate_logs = [os.path.join(workdir, f"worker{i}.rate") for i in range(k)] if rate_logs else []
        self.procs = []
        try:
            for i in range(k):
                argv = [sys.executable, os.path.abspath(__file__), "worker", "--manifest", manifest,
                        "--top", f"/w{i}", "--seed", str(1000 + i), "--out", self.outs[i]]
                argv += ["--ops", str(ops)] if ops else []
                argv += ["--size", str(size)] if size is not None else []
                argv += ["--rate-log", self.rate_logs[i]] if rate_logs else []
                argv += ["--rewrite", str(rewrite)] if rewrite is not None else []
                self.procs.append(subprocess.Popen(argv, env=python_env(env), stdout=subprocess.PIPE,
                                                    text=True))
        except BaseException:
            self.kill()
            raise
        self._wait_ready()

    def _wait_ready(self):
        end = time.time() + 60
        try:
            for p in self.procs:
                ready, _, _ = select.select([p.stdout], [], [], max(0.0, end - time.time()))
                if not ready or p.stdout.readline().strip() != "ready":
                    raise AssertionError("a load worker did not start (joining the pool)")
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout=60):
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        res = []
        for p, out in zip(self.procs, self.outs):
            rc = p.wait(timeout)
            if rc != 0 or not os.path.exists(out):
                raise AssertionError(f"load worker exited with status {rc} and no result")
            with open(out) as f:
                res.append(json.load(f))
        return res

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


class Churn(Workers):
    """A `churn` process creating and removing entries of directory d (names prefix<i>) of the
    pool of env; stop() returns its result."""

    def __init__(self, env, d, prefix, workdir):
        self.outs = [os.path.join(workdir, "churn.json")]
        argv = [sys.executable, os.path.abspath(__file__), "churn", "--dir", d, "--prefix", prefix,
                "--out", self.outs[0]]
        self.procs = [subprocess.Popen(argv, env=python_env(env), stdout=subprocess.PIPE, text=True)]
        self._wait_ready()


def main(argv=None):
    p = argparse.ArgumentParser(prog="chfsload.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write N files and their manifest")
    w.add_argument("--out", required=True)
    w.add_argument("--files", type=int, required=True)
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--top", default="/t")
    w.add_argument("--size", type=int, help="every file this size (default: mixed profile)")
    w.add_argument("--big-every", type=int, default=20, help="every K-th file over 1 MiB (0: none)")
    v = sub.add_parser("verify", help="check every byte of the files of manifests")
    v.add_argument("manifests", nargs="+")
    k = sub.add_parser("worker", help="keep writing and verifying until SIGTERM")
    k.add_argument("--manifest", required=True)
    k.add_argument("--top", required=True)
    k.add_argument("--seed", type=int, default=7)
    k.add_argument("--size", type=int, help="size of the files it writes (default: mixed, small)")
    k.add_argument("--out", required=True)
    k.add_argument("--rate-log")
    k.add_argument("--ops", type=float, help="at most this many operations a second")
    k.add_argument("--rewrite", type=float, default=0.25,
                   help="fraction of writes that rewrite one of its files (default 0.25)")
    c = sub.add_parser("churn", help="keep creating and removing entries of a directory until SIGTERM")
    c.add_argument("--dir", required=True)
    c.add_argument("--prefix", required=True)
    c.add_argument("--out", required=True)
    a = p.parse_args(argv)
    {"write": cmd_write, "verify": cmd_verify, "worker": cmd_worker, "churn": cmd_churn}[a.cmd](a)


if __name__ == "__main__":
    main()
