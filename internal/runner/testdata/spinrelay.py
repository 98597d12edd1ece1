# A TCP relay for the known-answer test of the path's cost per transaction
# (cost_test.go): LISTEN_ADDR:PORT to TARGET_ADDR:PORT, and every read of a
# message, either way, is followed by a spin of exactly SPIN_US microseconds
# of the reading thread's CPU time (CLOCK_THREAD_CPUTIME_ID) before it is
# written on. Python keeps the relay's own cost beside the spin to a few
# system calls; it exits after 10 minutes in any case.
import os
import socket
import sys
import threading
import time

listen, target, spin = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1000


def pump(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            t0 = time.thread_time_ns()
            while time.thread_time_ns() - t0 < spin:
                pass
            dst.sendall(b)
    except OSError:
        pass
    finally:
        src.close()
        dst.close()


threading.Timer(600, lambda: os._exit(0)).start()
host, port = listen.rsplit(":", 1)
ln = socket.socket()
ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ln.bind((host, int(port)))
ln.listen()
while True:
    c, _ = ln.accept()
    th, tp = target.rsplit(":", 1)
    try:
        d = socket.create_connection((th, int(tp)))
    except OSError:
        c.close()
        continue
    for s in (c, d):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(c, d), daemon=True).start()
    threading.Thread(target=pump, args=(d, c), daemon=True).start()
