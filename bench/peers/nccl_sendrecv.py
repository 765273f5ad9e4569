"""NCCL's send/recv of GPU tensors between two ranks, the peer of our
GPU-segment ping-pong and bandwidth across hosts (bench/gpu/cross-host.sh).

Run one process per rank with RANK, WORLD_SIZE=2, MASTER_ADDR, MASTER_PORT
and LOCAL_GPU set; NCCL's transport is whatever its environment leaves it
(cross-host.sh: sockets only, NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1
NCCL_SHM_DISABLE=1, NCCL_SOCKET_IFNAME of the veth). Rank 0 prints one
JSON line per size: the half round trip of a send/recv ping-pong (median
and spread over batches, each batch synchronised with the GPU), and the
bandwidth of a stream of sends (windows of 16).
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "8,4096,65536,1048576,4194304").split(",")]
    torch.cuda.set_device(int(os.environ.get("LOCAL_GPU", rank)))
    dist.init_process_group("nccl")
    peer = 1 - rank
    for size in sizes:
        t = torch.zeros(max(size, 1), dtype=torch.uint8, device="cuda")
        # Half round trips: batches of `per` round trips, synchronised.
        per = max(8, min(1000, (64 << 20) // max(size, 1) // 8))
        samples = []
        for batch in range(11):
            torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(per):
                if rank == 0:
                    dist.send(t, peer)
                    dist.recv(t, peer)
                else:
                    dist.recv(t, peer)
                    dist.send(t, peer)
            torch.cuda.synchronize()
            if batch > 0:  # the first is warm-up
                samples.append((time.perf_counter() - start) * 1e6 / (2 * per))
        # Bandwidth: windows of 16 sends, rank 1 receives.
        window, windows = 16, max(4, min(64, (512 << 20) // max(size, 1) // 16))
        bw = []
        for batch in range(4):
            torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(windows):
                for _ in range(window):
                    if rank == 0:
                        dist.send(t, peer)
                    else:
                        dist.recv(t, peer)
            torch.cuda.synchronize()
            # Done when the receiver has it all.
            ack = torch.zeros(1, device="cuda")
            if rank == 0:
                dist.recv(ack, peer)
            else:
                dist.send(ack, peer)
            torch.cuda.synchronize()
            if batch > 0:
                bw.append(size * window * windows / (time.perf_counter() - start) / 1e9)
        if rank == 0:
            samples.sort()
            q = lambda p: samples[min(len(samples) - 1, int(p * len(samples)))]
            print(json.dumps({
                "bench": "nccl-sendrecv", "transport": "nccl-socket", "size": size,
                "median_us": statistics.median(samples), "p10_us": q(0.1), "p90_us": q(0.9),
                "gbps_median": statistics.median(bw), "gbps_min": min(bw), "gbps_max": max(bw),
            }), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
