"""A malicious node for the cooperative-cache security tests (not a test module).

fake_gfccd.py LOCAL_SOCKET PEER_IP:PORT CAPTURE_FILE [SECRET_FILE | relay=IP:PORT |
                                                    relay-key=IP:PORT]

LOCAL_SOCKET: a stand-in for the node's gfccd that the attacker's own libgfarm talks to:
HELLO names PEER_IP:PORT as this node's cache endpoint, HAS claims every byte of the file (so
reading a file to its end registers that endpoint with gfmd as a holder), every GET misses,
every other request succeeds.
PEER_IP:PORT: the fake peer. It speaks whichever protocol the reader speaks: if the reader
sends first (a secret in clear, the old protocol) it accepts anything and answers GETs with
forged bytes ('F'); otherwise it sends a challenge, accepts the reader's proof, answers with a
random "proof" and forged data followed by a random "MAC". With SECRET_FILE (a peer that
knows the cluster secret, or a man in the middle of a real one) it passes the handshake
properly and sends forged data with a valid MAC over other bytes: only the reply MAC can
catch it. With relay=IP:PORT it is a man in the middle without the secret: it relays each
connection to that real gfccd and flips one data byte in every GET reply. With
relay-key=IP:PORT it relays unchanged bytes but rewrites requests: the (fs, incarnation) of the
first GET it relays is remembered, and every later GET is sent to the holder under that key
(another file system's or an earlier gfmd incarnation's pages of the same inode and
generation). Every byte a reader sends is appended to CAPTURE_FILE.
"""
import hashlib
import hmac
import os
import select
import socket
import struct
import sys
import threading

REQ = struct.Struct("!IIQQQIIQQ")  # magic op ino gen off len aux fs inc
REP = struct.Struct("!iI")
HELLO, AUTH, GET, HAS = 1, 2, 3, 11


def recv_exact(s, n, log=None):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
        if log:
            log(chunk)
    return buf


def local_conn(s, endpoint):
    with s:
        while True:
            try:
                magic, op, ino, gen, off, ln, aux, fs, inc = REQ.unpack(recv_exact(s, REQ.size))
            except (EOFError, OSError):
                return
            if op in (4, 6, 7, 10) and ln:  # PUT, RETAG, STAT_ADD, PUT_REF carry a payload
                recv_exact(s, ln)
            if op == HELLO:
                s.sendall(REP.pack(0, 96) + endpoint.encode().ljust(64, b"\0") + b"\0" * 32)
            elif op == HAS:  # a lie: "all of [0, off) is cached here"
                s.sendall(REP.pack(0, 8) + struct.pack("!Q", off))
            else:
                s.sendall(REP.pack(0, 0))  # GET: miss; others: ok


def mac(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def peer_conn(s, capture, secret):
    lock = threading.Lock()
    ns, session, seq = os.urandom(32), None, 0

    def log(chunk):
        with lock, open(capture, "ab") as f:
            f.write(chunk)

    with s:
        try:
            new_protocol = not select.select([s], [], [], 0.3)[0]  # the reader waits for us
            if new_protocol:
                s.sendall(REP.pack(0, 32) + ns)  # challenge
            while True:
                magic, op, ino, gen, off, ln, aux, fs, inc = REQ.unpack(
                    recv_exact(s, REQ.size, log))
                if op == AUTH:
                    auth = recv_exact(s, ln, log)
                    proof = os.urandom(32)
                    if secret and new_protocol:
                        nc = auth[:32]
                        proof = mac(secret, b"GFCC-server", ns, nc)
                        session = mac(secret, b"GFCC-session", ns, nc)
                    s.sendall(REP.pack(0, 32) + proof if new_protocol else REP.pack(0, 0))
                elif op == GET:
                    data = b"F" * ln
                    tag = os.urandom(32)
                    if session:  # a valid MAC, but over other bytes than those sent
                        h = struct.pack("!QQQQQQIiI", seq, fs, inc, ino, gen, off, ln, 0, ln)
                        tag = mac(session, b"GFCC-data", h, b"G" * ln)
                        seq += 1
                    s.sendall(REP.pack(0, ln + 32) + data + tag if new_protocol
                              else REP.pack(0, ln) + data)
                else:
                    return
        except (EOFError, OSError):
            return


def relay_conn(s, capture, upstream):
    host, port = upstream.rsplit(":", 1)
    u = socket.create_connection((host, int(port)), timeout=10)

    def reader_to_upstream():
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                with open(capture, "ab") as f:
                    f.write(chunk)
                u.sendall(chunk)
        except OSError:
            pass
        finally:
            u.close()

    threading.Thread(target=reader_to_upstream, daemon=True).start()
    with s:
        try:
            n = 0
            while True:  # replies: challenge, AUTH's, then GETs (data + MAC)
                hdr = recv_exact(u, REP.size)
                status, ln = REP.unpack(hdr)
                body = bytearray(recv_exact(u, ln))
                n += 1
                if n > 2 and ln > 32:
                    body[0] ^= 0x01  # one flipped bit in the data
                s.sendall(hdr + bytes(body))
        except (EOFError, OSError):
            return


def relay_key_conn(s, capture, upstream, first_key):
    host, port = upstream.rsplit(":", 1)
    u = socket.create_connection((host, int(port)), timeout=10)

    def reader_to_upstream():  # request by request: AUTH (+ payload), then GETs
        try:
            while True:
                hdr = recv_exact(s, REQ.size)
                magic, op, ino, gen, off, ln, aux, fs, inc = REQ.unpack(hdr)
                body = recv_exact(s, ln) if op == AUTH else b""
                if op == GET:
                    first_key.setdefault("key", (fs, inc))
                    fs, inc = first_key["key"]
                    hdr = REQ.pack(magic, op, ino, gen, off, ln, aux, fs, inc)
                with open(capture, "ab") as f:
                    f.write(hdr + body)
                u.sendall(hdr + body)
        except (EOFError, OSError):
            pass
        finally:
            u.close()

    threading.Thread(target=reader_to_upstream, daemon=True).start()
    with s:
        try:
            while True:
                chunk = u.recv(65536)
                if not chunk:
                    return
                s.sendall(chunk)
        except OSError:
            return


def serve(listener, handler, *args):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handler, args=(conn, *args), daemon=True).start()


def main():
    local_path, endpoint, capture = sys.argv[1:4]
    extra = sys.argv[4] if len(sys.argv) > 4 else None
    relay = extra[len("relay="):] if extra and extra.startswith("relay=") else None
    relay_key = extra[len("relay-key="):] if extra and extra.startswith("relay-key=") else None
    secret = open(extra, "rb").read(32) if extra and not relay and not relay_key else None
    host, port = endpoint.rsplit(":", 1)
    lu = socket.socket(socket.AF_UNIX)
    if os.path.exists(local_path):
        os.unlink(local_path)
    lu.bind(local_path)
    lu.listen(16)
    lt = socket.socket()
    lt.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lt.bind((host, int(port)))
    lt.listen(16)
    open(capture, "wb").close()
    if relay_key:
        threading.Thread(target=serve, args=(lt, relay_key_conn, capture, relay_key, {}),
                         daemon=True).start()
    elif relay:
        threading.Thread(target=serve, args=(lt, relay_conn, capture, relay), daemon=True).start()
    else:
        threading.Thread(target=serve, args=(lt, peer_conn, capture, secret),
                         daemon=True).start()
    print("ready", flush=True)
    serve(lu, local_conn, endpoint)


if __name__ == "__main__":
    main()
