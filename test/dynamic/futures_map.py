"""mpi4py.futures over the usnic BTL: a MPIPoolExecutor spawns its workers
(MPI_Comm_spawn of python3) and maps a function over 200 tasks whose
arguments and results carry payloads from 0 B to 1 MiB.  Every result is
checked; prints "PASS futures-map" or "FAIL futures-map: ..." and exits 1.

    mpirun -np 1 python3 futures_map.py [WORKERS]
"""
import hashlib
import sys

from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor

SIZES = [0, 8, 1000, 64 * 1024, 1024 * 1024]


def payload(i, n):
    # a checkable pattern: differs per task and per position
    return bytes(((j * 31 + i * 7) ^ (j >> 8)) & 0xFF for j in range(n)) if n < 70000 \
        else (hashlib.sha256(b"%d" % i).digest() * (n // 32 + 1))[:n]


def work(args):
    i, data = args
    # returns: a value computed from i, the payload's digest (what arrived
    # here) and the payload reversed (the other direction)
    return i * i + 1, hashlib.sha256(data).hexdigest(), data[::-1], \
        MPI.Comm.Get_parent() != MPI.COMM_NULL


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    tasks = [(i, payload(i, SIZES[i % len(SIZES)])) for i in range(200)]
    with MPIPoolExecutor(max_workers=workers) as ex:
        results = list(ex.map(work, tasks))
    bad = 0
    for (i, data), (sq, digest, rev, spawned) in zip(tasks, results):
        if sq != i * i + 1 or digest != hashlib.sha256(data).hexdigest() \
                or rev != data[::-1] or not spawned:
            bad += 1
            if bad < 5:
                print("FAIL futures-map: task %d (%d B): wrong result" % (i, len(data)), flush=True)
    if len(results) != len(tasks):
        print("FAIL futures-map: %d results for %d tasks" % (len(results), len(tasks)), flush=True)
        sys.exit(1)
    if bad:
        print("FAIL futures-map: %d of %d results wrong" % (bad, len(tasks)), flush=True)
        sys.exit(1)
    print("PASS futures-map: %d tasks, %d spawned workers, %d B moved each way"
          % (len(tasks), workers, sum(len(d) for _, d in tasks)), flush=True)


if __name__ == "__main__":
    main()
