"""The rank programs of the test suite: ``gaspi-run -n N python3 ranks.py NAME``.

Each scenario checks what it moved (data, notification values, senders)
and ends with the line ``OK NAME rank R``; any failed check raises, so the
rank exits non-zero and the launcher stops the job. ``test_ranks.py`` runs
them on 2 and 4 ranks.
"""

import os
import signal
import sys
import threading
import time

import numpy as np

import gaspi


def say(*words):
    # One write per line: ranks share the terminal.
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def expect_error(kind, call, *args, **kwargs):
    """Runs the call, which must raise gaspi.Error of this kind."""
    try:
        call(*args, **kwargs)
    except gaspi.Error as e:
        assert e.kind == kind, f"{call.__name__}: expected {kind}, got {e.kind}: {e}"
        assert str(e), "an error carries the runtime's message"
        return e
    raise AssertionError(f"{call.__name__}{args} did not raise gaspi.Error {kind}")


def ring(g):
    """write_notify into the next rank, 4 KiB, every rank at once."""
    seg = g.segment_create(0, 1 << 20)
    a = seg.array(np.uint64)
    me, n = g.rank(), g.size()
    a[:512] = 1000 + me
    g.write_notify(0, 0, (me + 1) % n, 0, 8192, 4096, 7, me + 1)
    g.wait()
    nid = g.notify_waitsome(0, 0, 64, timeout=30_000)
    left = (me - 1) % n
    assert nid == 7, nid
    assert g.notify_reset(0, nid) == left + 1
    assert g.notify_reset(0, nid) == 0, "a reset notification reads 0"
    assert (a[1024:1536] == 1000 + left).all()
    g.barrier()


def write_read(g):
    """write, notify, read, read_notify; sizes 0, 1 and odd offsets."""
    seg = g.segment_create(1, 64 * 1024)
    b = seg.array()  # bytes
    me, n = g.rank(), g.size()
    right, left = (me + 1) % n, (me - 1) % n
    b[:1000] = np.arange(1000, dtype=np.uint32).astype(np.uint8) ^ me
    # write then notify on the same queue: the notification comes after.
    g.write(1, 0, right, 1, 10_001, 1000)
    g.write(1, 0, right, 1, 0, 0)  # size 0: checked, moves nothing
    g.notify(right, 1, 3, 9)
    g.wait()
    assert g.notify_waitsome(1, 3, 1, timeout=30_000) == 3
    assert g.notify_reset(1, 3) == 9
    expected = np.arange(1000, dtype=np.uint32).astype(np.uint8) ^ left
    assert (b[10_001:11_001] == expected).all()
    g.barrier()
    # read the right neighbour's first 1000 bytes into 20_000.
    g.read(1, 20_000, right, 1, 0, 1000)
    g.wait()
    assert (b[20_000:21_000] == (np.arange(1000, dtype=np.uint32).astype(np.uint8) ^ right)).all()
    # read_notify sets our own notification once the data is here.
    g.read_notify(1, 30_000, right, 1, 10_001, 1000, 11)
    assert g.notify_waitsome(1, 11, 1, timeout=30_000) == 11
    assert g.notify_reset(1, 11) == 1
    g.wait()
    assert (b[30_000:31_000] == (np.arange(1000, dtype=np.uint32).astype(np.uint8) ^ me)).all()
    # A large write (the GIL is released while it copies).
    big = g.segment_create(2, 4 << 20)
    v = big.array(np.int64)
    v[: (1 << 18)] = np.arange(1 << 18) * (me + 1)
    g.barrier()
    g.write_notify(2, 0, right, 2, 2 << 20, 2 << 20, 0, 1)
    g.wait()
    g.notify_waitsome(2, 0, 1, timeout=30_000)
    g.notify_reset(2, 0)
    assert (v[1 << 18 :] == np.arange(1 << 18) * (left + 1)).all()
    # Segment bytes copies.
    seg.write_bytes(40_000, b"gaspi")
    assert seg.read_bytes(40_000, 5) == b"gaspi"
    g.barrier()


def lists(g):
    """write_list(_notify), read_list(_notify) with ListElem and tuples."""
    seg = g.segment_create(0, 1 << 16)
    a = seg.array(np.uint32)
    me, n = g.rank(), g.size()
    right, left = (me + 1) % n, (me - 1) % n
    a[:1024] = me * 10_000 + np.arange(1024)
    g.barrier()
    elems = [gaspi.ListElem(0, 0, 0, 8192, 400), (0, 1000, 0, 12_288, 24)]
    g.write_list_notify(elems, right, 0, 5, 77)
    g.wait()
    assert g.notify_waitsome(0, 5, 1, timeout=30_000) == 5
    assert g.notify_reset(0, 5) == 77
    src = left * 10_000 + np.arange(1024)
    assert (a[2048:2148] == src[:100]).all()
    assert (a[3072:3078] == src[250:256]).all()
    g.barrier()
    g.write_list([(0, 0, 0, 16_384, 8)], right)
    g.wait()
    g.barrier()
    assert (a[4096:4098] == src[:2]).all()
    g.read_list([(0, 20_000, 0, 0, 16), (0, 20_016, 0, 64, 16)], right)
    g.wait()
    rsrc = right * 10_000 + np.arange(1024)
    assert (a[5000:5004] == rsrc[:4]).all() and (a[5004:5008] == rsrc[16:20]).all()
    g.read_list_notify([(0, 24_000, 0, 128, 8)], right, 0, 6)
    assert g.notify_waitsome(0, 6, 1, timeout=30_000) == 6
    assert g.notify_reset(0, 6) == 1
    g.wait()
    assert (a[6000:6002] == rsrc[32:34]).all()
    g.barrier()


def atomics(g):
    """Every rank adds to rank 0's counter; compare_swap elects one."""
    seg = g.segment_create(0, 4096)
    a = seg.array(np.uint64)
    n = g.size()
    for _ in range(50):
        g.atomic_fetch_add(0, 0, 0, 3, timeout=30_000)
    g.barrier()
    if g.rank() == 0:
        assert a[0] == 150 * n, a[0]
    old = g.atomic_compare_swap(0, 8, 0, 0, g.rank() + 1, timeout=30_000)
    g.barrier()
    winner = g.atomic_fetch_add(0, 8, 0, 0)
    assert 1 <= winner <= n
    assert (old == 0) == (winner == g.rank() + 1), (old, winner)
    expect_error("Unaligned", g.atomic_fetch_add, 0, 4, 0, 1)
    g.barrier()


def passive(g):
    """Every rank but 0 sends rank 0 a message; rank 0 names the senders."""
    seg = g.segment_create(0, 1 << 16)
    b = seg.array()
    me, n = g.rank(), g.size()
    if me != 0:
        b[:100] = me
        g.passive_send(0, 0, 0, 100 + me, timeout=30_000)
    else:
        seen = set()
        for _ in range(n - 1):
            sender, size = g.passive_receive(0, 1000, timeout=30_000)
            assert size == 100 + sender, (sender, size)
            assert (b[1000:1100] == sender).all()
            seen.add(sender)
        assert seen == set(range(1, n)), seen
        expect_error("PassiveSize", g.passive_send, 0, 0, 0, 0)
        try:
            g.passive_receive(0, 0, timeout=gaspi.Timeout.ms(50))
            raise AssertionError("passive_receive with nothing sent returned")
        except gaspi.TimeoutError:
            pass
    g.barrier()


def groups(g):
    """A group of the even ranks: commit, barrier, allreduce, segment."""
    me, n = g.rank(), g.size()
    evens = list(range(0, n, 2))
    grp = g.group_create()
    for r in evens:
        g.group_add(grp, r)
    assert g.group_size(grp) == len(evens)
    assert g.group_ranks(grp) == evens
    expect_error("AlreadyMember", g.group_add, grp, 0)
    if me in evens:
        g.group_commit(grp, timeout=30_000)
        g.barrier(grp, timeout=30_000)
        s = g.allreduce(np.array([me, 1], dtype=np.int64), "sum", grp)
        assert s.tolist() == [sum(evens), len(evens)], s
        seg = g.segment_create(3, 4096, group=grp)
        assert seg.size == 4096
    else:
        expect_error("NotGroupMember", g.group_commit, grp, timeout=1000)
    g.barrier()
    g.group_delete(grp)
    assert g.group_ranks(gaspi.GROUP_ALL) == list(range(n))
    g.barrier()


def allreduce(g):
    """Every dtype and operation, data checked."""
    me, n = g.rank(), g.size()
    ranks = np.arange(n)
    for dt in (np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64):
        x = np.array([me + 1, 10 * me, 7], dtype=dt)
        s = g.allreduce(x, "sum")
        assert s.dtype == dt and s.shape == (3,)
        assert s.tolist() == [float(v) for v in [(ranks + 1).sum(), 10 * ranks.sum(), 7 * n]], (dt, s)
        assert g.allreduce(x, "min").tolist() == [1, 0, 7]
        assert g.allreduce(x, "max").tolist() == [n, 10 * (n - 1), 7]
    m = g.allreduce(np.full((3, 4), me, dtype=np.float64), "max", timeout=30_000)
    assert m.shape == (3, 4) and (m == n - 1).all()
    big = g.allreduce(np.ones(gaspi.ALLREDUCE_ELEM_MAX, dtype=np.int32))
    assert (big == n).all()
    try:
        g.allreduce(np.ones(3, dtype=np.int16))
        raise AssertionError("int16 allreduce accepted")
    except TypeError:
        pass
    try:
        g.allreduce(np.ones(3), "prod")
        raise AssertionError("allreduce 'prod' accepted")
    except ValueError:
        pass
    g.barrier()


def alias(g):
    """Arrays alias the segment: a peer's write is seen in an array made
    before it; a local store is read by a peer; DLPack views too."""
    seg = g.segment_create(0, 1 << 16)
    me, n = g.rank(), g.size()
    right, left = (me + 1) % n, (me - 1) % n
    whole = seg.array(np.float64)  # made before anything is written
    part = seg.array(np.float64, offset=8192, count=16)
    assert np.shares_memory(whole, part) or whole.ctypes.data + 8192 == part.ctypes.data
    assert part.ctypes.data == seg.ptr + 8192 and whole.ctypes.data == seg.ptr
    host_dl = np.from_dlpack(gaspi.device_view(seg, np.float64))
    assert host_dl.ctypes.data == seg.ptr
    # A local store, written out by the runtime from the segment itself.
    whole[:16] = np.arange(16) + 100 * me
    g.write_notify(0, 0, right, 0, 8192, 128, 1, 1)
    g.wait()
    g.notify_waitsome(0, 1, 1, timeout=30_000)
    g.notify_reset(0, 1)
    expected = np.arange(16) + 100 * left
    assert (part == expected).all(), "the peer's write is seen in an array made before it"
    assert (whole[1024:1040] == expected).all()
    assert (host_dl[1024:1040] == expected).all(), "and through DLPack"
    # The array keeps the memory alive after the handle goes.
    del seg
    assert (part == expected).all()
    try:
        gaspi.device_view(g.segment(0), np.float64, offset=8, count=1 << 20)
        raise AssertionError("a view past the segment's end was made")
    except ValueError:
        pass
    g.barrier()


def segments(g):
    """alloc, register, size_of, list, delete; memory outlives delete."""
    me, n = g.rank(), g.size()
    right, left = (me + 1) % n, (me - 1) % n
    seg = g.segment_alloc(5, 12_345)
    assert (seg.id, seg.size, seg.gpu) == (5, 12_345, None)
    assert 5 in g.segment_list() and g.segment_size(5) == 12_345
    g.segment_register(5, left, timeout=30_000)  # the left neighbour writes into us
    g.barrier()
    assert g.segment_size_of(right, 5) == 12_345
    src = g.segment_create(6, 4096)
    src.array()[:10] = me + 1
    g.write_notify(6, 0, right, 5, 12_000, 10, 0, 1)
    g.wait()
    g.notify_waitsome(5, 0, 1, timeout=30_000)
    a = seg.array()
    assert (a[12_000:12_010] == left + 1).all()
    g.barrier()
    g.segment_delete(5)
    assert 5 not in g.segment_list()
    assert (a[12_000:12_010] == left + 1).all(), "the array outlives the delete"
    expect_error("UnknownSegment", g.segment_size, 5)
    expect_error("SegmentExists", g.segment_alloc, 6, 10)
    g.barrier()


def errors(g):
    """Bad arguments, timeouts, the exception classes."""
    me, n = g.rank(), g.size()
    g.segment_create(0, 4096)
    right = (me + 1) % n
    expect_error("OutOfBounds", g.write, 0, 4000, right, 0, 0, 200)
    expect_error("OutOfBounds", g.write, 0, 0, right, 0, 4000, 200)
    expect_error("UnknownSegment", g.write, 9, 0, right, 0, 0, 8)
    expect_error("NotifyValueZero", g.write_notify, 0, 0, right, 0, 0, 8, 1, 0)
    expect_error("BadRank", g.write, 0, 0, n + 3, 0, 0, 8)
    expect_error("BadQueue", g.wait, 99)
    expect_error("NotifyIdOutOfRange", g.notify_reset, 0, 1 << 20)
    expect_error("UnknownSegment", g.notify_waitsome, 7, 0, 1)
    try:
        g.segment_create(300, 10)
        raise AssertionError("segment id 300 accepted")
    except ValueError:
        pass
    # Queue depth: post until full, then wait empties it.
    q = g.queue_create()
    depth = 0
    try:
        for _ in range(100_000):
            g.write(0, 0, right, 0, 0, 8, q)
            depth += 1
    except gaspi.Error as e:
        assert e.kind == "QueueFull", e
    assert depth == g.queue_size(q) > 0
    g.wait(q)
    assert g.queue_size(q) == 0
    g.queue_delete(q)
    # Timeouts: a distinct, catchable exception (also Python's TimeoutError).
    for t in (0, 30, gaspi.TEST, gaspi.Timeout.ms(30)):
        t0 = time.monotonic()
        try:
            g.notify_waitsome(0, 0, 8, timeout=t)
            raise AssertionError("notify_waitsome returned with nothing set")
        except gaspi.TimeoutError as e:
            assert isinstance(e, gaspi.Error) and isinstance(e, TimeoutError)
            assert e.kind == "Timeout" and e.rank is None
        assert time.monotonic() - t0 < 10
    try:
        g.barrier(timeout=-1)
        raise AssertionError("a negative timeout accepted")
    except ValueError:
        pass
    try:
        g.barrier(timeout="soon")
        raise AssertionError("a string timeout accepted")
    except TypeError:
        pass
    assert repr(gaspi.Timeout.ms(5)) == "Timeout.ms(5)" and gaspi.Timeout.ms(5).milliseconds == 5
    assert gaspi.BLOCK == gaspi.Timeout.BLOCK and gaspi.BLOCK.milliseconds is None
    g.barrier()
    g.term()
    assert g.terminated
    expect_error("NotInitialized", g.rank)
    g.term()  # again: nothing


def peer_dead(g):
    """Rank 1 dies; rank 0's calls name it (run with --keep-going)."""
    me, n = g.rank(), g.size()
    g.segment_create(0, 4096)
    g.barrier()
    if me == 1:
        os._exit(9)  # as if killed: no goodbye
    if me == 0:
        deadline = time.monotonic() + 60
        while True:
            try:
                g.proc_ping(1, timeout=1000)
                g.write_notify(0, 0, 1, 0, 0, 8, 0, 1)
                g.wait(timeout=1000)
            except gaspi.PeerDeadError as e:
                assert e.rank == 1 and e.kind == "PeerDead", (e.rank, e.kind)
                assert "rank 1" in str(e), str(e)
                dead = e.rank
                break
            except gaspi.TimeoutError:
                pass
            assert time.monotonic() < deadline, "rank 1's death was not reported"
            time.sleep(0.05)
        assert g.state_vec()[1] == "corrupt", g.state_vec()
        say("dead peer named: rank", dead)


def gil(g):
    """A blocking wait releases the GIL: another thread runs meanwhile and
    sets the notification the wait is for."""
    seg = g.segment_create(0, 4096)
    me = g.rank()
    done = []

    def waiter():
        done.append(g.notify_waitsome(0, 42, 1, timeout=30_000))

    t = threading.Thread(target=waiter)
    t.start()
    # Pure Python work while the other thread waits in the runtime.
    spins = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:
        spins += 1
    assert spins > 1000, spins
    assert not done
    seg.array()[0] = 1
    g.write_notify(0, 0, me, 0, 8, 8, 42, 5)  # to itself
    g.wait()
    t.join(30)
    assert done == [42], done
    assert g.notify_reset(0, 42) == 5
    g.barrier()


def interrupt(g):
    """Ctrl-C interrupts a blocking wait (run alone; the test sends SIGINT)."""
    g.segment_create(0, 4096)
    say("waiting")
    try:
        g.notify_waitsome(0, 0, 1)  # blocks: nobody notifies
    except KeyboardInterrupt:
        say("interrupted")
    # And a wait on a helper thread (segment creation would not be
    # interrupted otherwise): here the signal is sent by ourselves.
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        g.barrier()  # a job of one passes at once
        g.notify_waitsome(0, 1, 1)
    except KeyboardInterrupt:
        say("interrupted again")


def gpu_dlpack(g):
    """A GPU segment as a torch tensor (DLPack and __cuda_array_interface__),
    aliasing the segment; the runtime's copies reach it."""
    import torch

    dev = g.rank() % torch.cuda.device_count()
    seg = g.segment_create(0, 1 << 20, gpu=dev)
    assert seg.gpu == dev
    view = seg.array(np.float32)
    assert isinstance(view, gaspi.DeviceArray) and view.shape == ((1 << 20) // 4,)
    t = torch.from_dlpack(view)
    assert t.device == torch.device("cuda", dev) and t.data_ptr() == seg.ptr
    assert t.dtype == torch.float32 and t.shape == ((1 << 20) // 4,)
    t2 = torch.as_tensor(seg.array(torch.int32, offset=4096, count=16), device=f"cuda:{dev}")
    assert t2.data_ptr() == seg.ptr + 4096
    t[:1024] = torch.arange(1024, device=t.device, dtype=torch.float32) + 1000 * g.rank()
    torch.cuda.synchronize(dev)
    got = np.frombuffer(seg.read_bytes(0, 4096), dtype=np.float32)
    assert (got == np.arange(1024) + 1000 * g.rank()).all(), "the tensor wrote the segment"
    seg.write_bytes(8192, np.full(16, 7, dtype=np.float32).tobytes())
    assert (t[2048:2064] == 7).all().item(), "the segment's bytes are the tensor's"
    # A peer's write lands in the tensor made before it.
    me, n = g.rank(), g.size()
    right, left = (me + 1) % n, (me - 1) % n
    host = g.segment_create(1, 1 << 16)
    host.array(np.float32)[:256] = np.arange(256) * (me + 1)
    g.write_notify(1, 0, right, 0, 65536, 1024, 3, 1)  # host -> GPU
    g.wait()
    g.notify_waitsome(0, 3, 1, timeout=60_000)
    g.notify_reset(0, 3)
    torch.cuda.synchronize(dev)
    assert torch.equal(t[16384:16640].cpu(), torch.arange(256, dtype=torch.float32) * (left + 1))
    g.barrier()
    # GPU -> host: our tensor's first 1024 floats into the right's host segment.
    g.write_notify(0, 0, right, 1, 8192, 4096, 4, 1)
    g.wait()
    g.notify_waitsome(1, 4, 1, timeout=60_000)
    g.notify_reset(1, 4)
    assert (host.array(np.float32)[2048:3072] == np.arange(1024) + 1000 * left).all()
    # And a read of the right's GPU segment into our host segment.
    g.barrier()
    g.read(1, 32768, right, 0, 0, 4096)
    g.wait()
    assert (host.array(np.float32)[8192:9216] == np.arange(1024) + 1000 * right).all()
    g.barrier()


def gpu_absent(g):
    """Without a GPU a GPU segment is refused with gaspi.Error."""
    e = expect_error("Gpu", g.segment_alloc, 0, 4096, gpu=0)
    say("no GPU:", e)


SCENARIOS = {
    f.__name__: f
    for f in (ring, write_read, lists, atomics, passive, groups, allreduce, alias, segments, errors, peer_dead, gil, interrupt, gpu_dlpack, gpu_absent)
}


def main():
    name = sys.argv[1]
    with gaspi.init() as g:
        me = g.rank()
        SCENARIOS[name](g)
    say("OK", name, "rank", me)


if __name__ == "__main__":
    main()
