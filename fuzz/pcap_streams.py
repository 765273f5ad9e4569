#!/usr/bin/env python3
"""Splits a pcap of loopback TCP traffic into one file per connection
direction (its payload bytes in sequence order): fuzz/seed.sh's recorder.

Usage: fuzz/pcap_streams.py CAPTURE.pcap OUT_DIR
"""
import os
import struct
import sys


def packets(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        link = struct.unpack(end + "I", head[20:24])[0]
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, _ = struct.unpack(end + "IIII", rec)
            yield link, f.read(incl)


def tcp_payloads(path):
    for link, pkt in packets(path):
        if link == 1:  # Ethernet
            if len(pkt) < 14:
                continue
            ethertype, pkt = struct.unpack("!H", pkt[12:14])[0], pkt[14:]
        elif link == 113:  # Linux cooked
            ethertype, pkt = struct.unpack("!H", pkt[14:16])[0], pkt[16:]
        else:
            continue
        if ethertype == 0x0800:
            ihl = (pkt[0] & 0x0F) * 4
            if pkt[9] != 6:
                continue
            src, dst, seg = pkt[12:16], pkt[16:20], pkt[ihl:struct.unpack("!H", pkt[2:4])[0]]
        elif ethertype == 0x86DD:
            if pkt[6] != 6:
                continue
            src, dst, seg = pkt[8:24], pkt[24:40], pkt[40:40 + struct.unpack("!H", pkt[4:6])[0]]
        else:
            continue
        sport, dport, seq = struct.unpack("!HHI", seg[:8])
        off = (seg[12] >> 4) * 4
        data = seg[off:]
        if data:
            yield (src, sport, dst, dport), seq, data


def main():
    cap, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    flows = {}
    for key, seq, data in tcp_payloads(cap):
        flows.setdefault(key, {})[seq] = data
    n = 0
    for key, segs in flows.items():
        first = min(segs)
        stream = bytearray()
        for seq in sorted(segs, key=lambda s: (s - first) % (1 << 32)):
            rel = (seq - first) % (1 << 32)
            if rel < len(stream):
                stream += segs[seq][len(stream) - rel:]
            elif rel == len(stream):
                stream += segs[seq]
            else:
                break  # a gap: keep what is whole
        with open(os.path.join(out, f"stream-{n:05d}"), "wb") as f:
            f.write(stream)
        n += 1
    print(f"{n} streams")


if __name__ == "__main__":
    main()
