"""A peer that stops reading, for test_coop_workers.py (not a test module).

stall_peer.py LOCAL_SOCKET SECRET_FILE HOLDER_IP:PORT CONNECTIONS LENGTH

LOCAL_SOCKET: a stand-in for a node's gfccd, only to learn the cache key of a file: a process
reading the file with GFARM_COOP_CACHE_SOCKET=LOCAL_SOCKET sends its GETs here under the key
gfmd gave it (fs, incarnation, inode, generation); the first one is kept, every GET misses, other
requests succeed. Prints "ready" once listening.
Then, on the stdin line "go": opens CONNECTIONS connections to the holder's gfccd, passes the
challenge-response with the cluster secret on each (a real peer), then sends on each a GET of
LENGTH bytes at offset 0 under the kept key, and never reads the replies (4 KiB receive buffers): each reply
that does not fit into the socket buffers holds the holder's worker in its send. Prints
"stalled". Exits (closing everything) at the next stdin line or EOF.
"""
import hashlib
import hmac
import os
import socket
import struct
import sys
import threading

REQ = struct.Struct("!IIQQQIIQQ")  # magic op ino gen off len aux fs inc
REP = struct.Struct("!iI")
MAGIC = 0x47464343
HELLO, AUTH, GET, HAS = 1, 2, 3, 11
PAYLOAD_OPS = (4, 6, 7, 10)  # PUT, RETAG, STAT_ADD, PUT_REF


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def local_conn(s, keys):
    with s:
        while True:
            try:
                _, op, ino, gen, off, ln, _, fs, inc = REQ.unpack(recv_exact(s, REQ.size))
                if op in PAYLOAD_OPS and ln:
                    recv_exact(s, ln)
            except (EOFError, OSError):
                return
            if op == HELLO:
                s.sendall(REP.pack(0, 96) + b"127.0.0.1:1".ljust(64, b"\0") + b"\0" * 32)
            elif op == HAS:
                s.sendall(REP.pack(0, 8) + struct.pack("!Q", 0))
            else:
                if op == GET:
                    keys.setdefault("key", (fs, inc, ino, gen))
                s.sendall(REP.pack(0, 0))  # GET: miss; others: ok


def mac(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def authenticated(holder, secret):
    host, port = holder.rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((host, int(port)))
    status, ln = REP.unpack(recv_exact(s, REP.size))
    ns = recv_exact(s, ln)
    nc = os.urandom(32)
    s.sendall(REQ.pack(MAGIC, AUTH, 0, 0, 0, 64, 0, 0, 0) + nc
              + mac(secret, b"GFCC-client", ns, nc))
    status, ln = REP.unpack(recv_exact(s, REP.size))
    if status != 0 or recv_exact(s, ln) != mac(secret, b"GFCC-server", ns, nc):
        raise RuntimeError("the holder did not pass the handshake")
    return s


def main():
    local_path, secret_file, holder, n, length = sys.argv[1:6]
    secret = open(secret_file, "rb").read(32)
    keys = {}
    if os.path.exists(local_path):
        os.unlink(local_path)
    lu = socket.socket(socket.AF_UNIX)
    lu.bind(local_path)
    lu.listen(16)

    def serve():
        while True:
            conn, _ = lu.accept()
            threading.Thread(target=local_conn, args=(conn, keys), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    if "key" not in keys:
        print("no key: nothing read through the local socket", flush=True)
        return
    # every connection authenticated first: the GETs then hold the workers that would
    # answer a later AUTH
    conns = [authenticated(holder, secret) for _ in range(int(n))]
    fs, inc, ino, gen = keys["key"]
    for s in conns:
        s.sendall(REQ.pack(MAGIC, GET, ino, gen, 0, int(length), 0, fs, inc))
    print("stalled", flush=True)
    sys.stdin.readline()
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
