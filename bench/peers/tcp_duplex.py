"""Raw TCP both ways at once between two hosts: the physical limit of a job
that moves as many bytes back as it sends (the matrix-vector job: 128 B of
input and 128 B of products per vector). No runtime: plain sockets with
TCP_NODELAY, 1 MiB writes, one sender and one receiver thread per end.

    tcp_duplex.py serve PORT SECONDS          (one end)
    tcp_duplex.py connect HOST PORT SECONDS   (the other; prints JSON)

The connecting end prints {"bench":"raw-tcp-duplex", "out_gbps", "in_gbps",
"total_gbps"}; the sockets move bytes for SECONDS after the connection.
"""
import json
import socket
import sys
import threading
import time

CHUNK = 1 << 20


def pump(sock, seconds, result, key):
    buf = bytearray(CHUNK)
    end = time.perf_counter() + seconds
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() < end:
        sock.sendall(buf)
        sent += CHUNK
    result[key] = sent / (time.perf_counter() - start) / 1e9
    sock.shutdown(socket.SHUT_WR)


def drain(sock, result, key):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    got = 0
    start = time.perf_counter()
    while True:
        n = sock.recv_into(view)
        if n == 0:
            break
        got += n
    result[key] = got / (time.perf_counter() - start) / 1e9


def run(sock, seconds):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    result = {}
    threads = [threading.Thread(target=pump, args=(sock, seconds, result, "out_gbps")),
               threading.Thread(target=drain, args=(sock, result, "in_gbps"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


def main():
    if sys.argv[1] == "serve":
        port, seconds = int(sys.argv[2]), float(sys.argv[3])
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(1)
        conn, _ = srv.accept()
        run(conn, seconds)
    else:
        host, port, seconds = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
        for _ in range(100):
            try:
                sock = socket.create_connection((host, port))
                break
            except OSError:
                time.sleep(0.05)
        r = run(sock, seconds)
        r["total_gbps"] = r["out_gbps"] + r["in_gbps"]
        print(json.dumps({"bench": "raw-tcp-duplex", **r}), flush=True)


if __name__ == "__main__":
    main()
