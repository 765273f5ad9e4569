"""The batched matrix-vector job in Python: a CPU node feeds a GPU node.

Rank 0 (the CPU node, NumPy) streams batches of 32-element float32 vectors
into rank 1's segment with write_notify; rank 1 multiplies each vector by a
constant 32 x 32 matrix and writes the products back into rank 0's segment
with write_notify; rank 0 checks every product against NumPy's and reports
vectors per second. Several batches are in flight (``--slots``), each slot
on its own queue, so rank 0 refills a slot as soon as its products are back.
The Rust job is ``examples/matvec.rs`` (same layout of the work).

Rank 1's segment is GPU memory when torch finds a GPU (the products are
computed by torch on the segment itself, through DLPack, and written from
GPU memory straight into rank 0's host segment); otherwise host memory and
a NumPy product (``--node host`` forces that).

    gaspi-run -n 2 python3 examples/python/matvec.py [--batch 960] [--vectors 500000]
"""

import argparse
import sys
import time

import numpy as np

import gaspi

DIM = 32
#: Notification ids: a batch for rank 1 in slot s is s; its products for rank 0, PRODUCTS + s.
PRODUCTS = 1000
#: The notification that tells rank 1 to stop.
STOP = 2000


def layout(batch: int, slots: int):
    """Byte offsets of slot s's inputs and products, the same on both ranks."""
    nbytes = batch * DIM * 4
    return nbytes, (lambda s: s * nbytes), (lambda s: (slots + s) * nbytes), 2 * slots * nbytes


def gpu_node_reason():
    try:
        import torch
    except ImportError as e:
        return f"torch is not installed ({e})"
    if not torch.cuda.is_available():
        return "torch finds no CUDA device"
    return None


def cpu_node(g, a, matrix: np.ndarray, seg) -> int:
    """Rank 0: feed the batches, check the products."""
    nbytes, in_off, out_off, _ = layout(a.batch, a.slots)
    rng = np.random.default_rng(1)
    inputs = [seg.array(np.float32, in_off(s), a.batch * DIM).reshape(a.batch, DIM) for s in range(a.slots)]
    outputs = [seg.array(np.float32, out_off(s), a.batch * DIM).reshape(a.batch, DIM) for s in range(a.slots)]
    batches = max(a.slots, a.vectors // a.batch)
    sent = done = 0
    worst = 0.0

    def send(s: int) -> None:
        nonlocal sent
        inputs[s][:] = rng.standard_normal((a.batch, DIM), dtype=np.float32)
        g.write_notify(0, in_off(s), 1, 0, in_off(s), nbytes, s, 1, s % g.queue_num())
        sent += 1

    t0 = time.perf_counter()
    for s in range(min(a.slots, batches)):
        send(s)
    while done < batches:
        nid = g.notify_waitsome(0, PRODUCTS, a.slots, timeout=60_000)
        g.notify_reset(0, nid)
        s = nid - PRODUCTS
        ref = inputs[s] @ matrix.T
        err = float(np.max(np.abs(outputs[s] - ref) / np.maximum(np.abs(ref), 1e-3)))
        worst = max(worst, err)
        done += 1
        if sent < batches:
            g.wait(s % g.queue_num())  # the slot's last write has left its source
            send(s)
    elapsed = time.perf_counter() - t0
    g.notify(1, 0, STOP, 1)
    g.wait()
    vectors = done * a.batch
    print(
        f"matvec (Python CPU node, rank 1 on {a.node_kind}): batch {a.batch}, {a.slots} slots: "
        f"{vectors / elapsed / 1e6:.3f} M vectors/s; checked {vectors} products, "
        f"largest relative error {worst:.1e} (limit 1e-5)",
        flush=True,
    )
    return 0 if worst <= 1e-5 else 1


def compute_node(g, a, matrix: np.ndarray, seg) -> None:
    """Rank 1: wait for a batch, multiply, send the products back."""
    nbytes, in_off, out_off, _ = layout(a.batch, a.slots)
    if seg.gpu is not None:
        import torch

        dev = torch.device("cuda", seg.gpu)
        m_t = torch.from_numpy(matrix.T.copy()).to(dev)
        view = lambda off: torch.from_dlpack(seg.array(np.float32, off, a.batch * DIM)).view(a.batch, DIM)  # noqa: E731
        inputs = [view(in_off(s)) for s in range(a.slots)]
        outputs = [view(out_off(s)) for s in range(a.slots)]

        def multiply(s: int) -> None:
            torch.matmul(inputs[s], m_t, out=outputs[s])
            torch.cuda.synchronize(dev)  # the products are in the segment before they are sent
    else:
        m_t = matrix.T.copy()
        inputs = [seg.array(np.float32, in_off(s), a.batch * DIM).reshape(a.batch, DIM) for s in range(a.slots)]
        outputs = [seg.array(np.float32, out_off(s), a.batch * DIM).reshape(a.batch, DIM) for s in range(a.slots)]

        def multiply(s: int) -> None:
            np.matmul(inputs[s], m_t, out=outputs[s])

    while True:
        # The batches (ids 0 .. slots-1) and STOP: one range would be long; look at both.
        try:
            nid = g.notify_waitsome(0, 0, a.slots, timeout=100)
        except gaspi.TimeoutError:
            if g.notify_reset(0, STOP):
                return
            continue
        g.notify_reset(0, nid)
        q = nid % g.queue_num()
        g.wait(q)  # the slot's previous products have left
        multiply(nid)
        g.write_notify(0, out_off(nid), 0, 0, out_off(nid), nbytes, PRODUCTS + nid, 1, q)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=960, help="vectors per batch")
    p.add_argument("--slots", type=int, default=4, help="batches in flight")
    p.add_argument("--vectors", type=int, default=500_000, help="vectors in all")
    p.add_argument("--node", choices=["auto", "gpu", "host"], default="auto", help="rank 1's memory")
    a = p.parse_args()
    with gaspi.init() as g:
        if g.size() != 2:
            print("matvec: run it on 2 ranks (gaspi-run -n 2)", file=sys.stderr)
            return 2
        # The same matrix on both ranks.
        matrix = np.random.default_rng(7).standard_normal((DIM, DIM), dtype=np.float32)
        _, _, _, total = layout(a.batch, a.slots)
        reason = gpu_node_reason()
        gpu = None
        if g.rank() == 1 and a.node != "host":
            if reason is None:
                gpu = 0
            elif a.node == "gpu":
                print(f"matvec: --node gpu, but {reason}", file=sys.stderr)
                return 1
        kinds = g.allreduce(np.array([0 if gpu is None else 1], dtype=np.int32), "max")
        a.node_kind = "a GPU segment (torch)" if kinds[0] else f"a host segment (NumPy{'' if a.node == 'host' else '; ' + str(reason)})"
        seg = g.segment_create(0, total, gpu=gpu)
        if g.rank() == 0:
            code = cpu_node(g, a, matrix, seg)
        else:
            compute_node(g, a, matrix, seg)
            code = 0
        g.barrier()
        return code


if __name__ == "__main__":
    sys.exit(main())
