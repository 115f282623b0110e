#!/usr/bin/python3
"""MPI client checks written with mpi4py, for the usnic BTL client suite.

    mpirun -np N /usr/bin/python3 mpi4py_checks.py [SECTION...]

Sections (all by default): pickle, buffer, coll, win.  Every rank checks
what it received against values it can compute itself; each section ends
with one line from rank 0:

    PASS <section> digest=<sha256 prefix>
    FAIL <section>: <first mismatches>

The digest covers everything every rank received in that section, so a
run over one BTL can be compared with a run over another: the data are
integers or exactly representable doubles, so the digests must be equal.
Exit status is 1 on any mismatch (on every rank), 0 otherwise.

Run it with "--mca osc pt2pt" so that the window section goes through
ob1 and the BTL under test (see the note at the import of MPI).
"""

import hashlib
import sys

import mpi4py

# One-sided traffic reaches the BTL only through osc/pt2pt (osc/rdma wants
# a BTL with RDMA, osc/sm shared memory), and Open MPI 4.1's osc/pt2pt
# refuses MPI_THREAD_MULTIPLE, mpi4py's default.  These checks use no
# threads, so they ask for MPI_THREAD_FUNNELED.
mpi4py.rc.thread_level = "funneled"

from mpi4py import MPI  # noqa: E402
import numpy as np  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
right = (rank + 1) % size
left = (rank - 1) % size

# Message sizes crossing the usual protocol switches (eager, first fragment,
# rendezvous, pipelined), the largest a little over 4 MiB.
SIZES = [0, 1, 7, 64, 1000, 4095, 4096, 8193, 65535, 65536, 150001,
         1 << 20, (4 << 20) + 3]


class Section:
    def __init__(self, name):
        self.name = name
        self.errors = []
        self.hash = hashlib.sha256()

    def check(self, ok, what):
        if not ok and len(self.errors) < 5:
            self.errors.append("rank %d: %s" % (rank, what))
        return ok

    def feed(self, data):
        """Adds received data to this rank's digest."""
        if isinstance(data, np.ndarray):
            self.hash.update(str(data.dtype).encode())
            self.hash.update(np.ascontiguousarray(data).tobytes())
        else:
            self.hash.update(repr(data).encode())

    def finish(self):
        errors = comm.gather(self.errors, root=0)
        digests = comm.gather(self.hash.hexdigest(), root=0)
        bad = 0
        if rank == 0:
            flat = [e for per_rank in errors for e in per_rank]
            bad = len(flat)
            if flat:
                print("FAIL %s: %s" % (self.name, "; ".join(flat[:8])), flush=True)
            else:
                digest = hashlib.sha256("".join(digests).encode()).hexdigest()
                print("PASS %s digest=%s" % (self.name, digest[:16]), flush=True)
        return comm.bcast(bad, root=0)


def pattern(n, seed):
    """n bytes that depend on the sender (seed) and the position."""
    return ((np.arange(n, dtype=np.uint64) * 2654435761 + seed * 40503) >> 7).astype(np.uint8)


def obj_for(src, dst, i):
    """A nested Python object whose content depends on sender, receiver and i."""
    n = SIZES[i % len(SIZES)]
    return {
        "src": src, "dst": dst, "i": i,
        "text": "from %d to %d #%d " % (src, dst, i) * 3,
        "nums": [src * 1000003 + dst * 1009 + k for k in range(i * 13 % 97)],
        "float": (src + 1) / 7.0 + i,
        "blob": pattern(n, src * 131 + dst * 7 + i).tobytes(),
        "nested": ({"k": (src, dst)}, [None, True, i * 1.5], frozenset({src, i})),
    }


# ---------------------------------------------------------------------------
def sec_pickle():
    s = Section("pickle")
    # ring of blocking send/recv: even ranks send first
    for i in range(len(SIZES)):
        out = obj_for(rank, right, i)
        if size == 1:
            got = out
        elif rank % 2 == 0:
            comm.send(out, dest=right, tag=i)
            got = comm.recv(source=left, tag=i)
        else:
            got = comm.recv(source=left, tag=i)
            comm.send(out, dest=right, tag=i)
        s.check(got == obj_for(left, rank, i), "send/recv object %d from %d differs" % (i, left))
        s.feed(got)

    # non-blocking to every peer at once, received with wildcards + probe
    reqs = [comm.isend(obj_for(rank, p, 100 + p), dest=p, tag=7) for p in range(size)]
    seen = set()
    arrived = {}
    for _ in range(size):
        st = MPI.Status()
        comm.probe(source=MPI.ANY_SOURCE, tag=7, status=st)
        src = st.Get_source()
        got = comm.recv(source=src, tag=7)
        seen.add(src)
        s.check(got == obj_for(src, rank, 100 + rank), "isend/probe object from %d differs" % src)
        arrived[src] = got
    MPI.Request.waitall(reqs)
    s.feed(sorted(arrived.items()))     # arrival order varies from run to run
    s.check(seen == set(range(size)), "wildcard receives saw %s" % sorted(seen))

    # sendrecv both directions, then irecv posted before the send
    for i in range(3):
        got = comm.sendrecv(obj_for(rank, right, 200 + i), dest=right, sendtag=i,
                            source=left, recvtag=i)
        s.check(got == obj_for(left, rank, 200 + i), "sendrecv object %d differs" % i)
        s.feed(got)
    req = comm.irecv(bytearray(8 << 20), source=left, tag=99)
    comm.barrier()
    comm.send(obj_for(rank, right, 300), dest=right, tag=99)
    got = req.wait()
    s.check(got == obj_for(left, rank, 300), "pre-posted irecv object differs")
    s.feed(got)
    return s.finish()


# ---------------------------------------------------------------------------
def expected_array(n, dtype, src, dst):
    base = np.arange(n, dtype=np.int64) * 3 + src * 1000 + dst
    if np.issubdtype(dtype, np.complexfloating):
        return (base + 1j * (base % 1013)).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        return (base % (1 << 50)).astype(dtype) + 0.25
    return (base % np.iinfo(dtype).max).astype(dtype)


def sec_buffer():
    s = Section("buffer")
    dtypes = [np.uint8, np.int32, np.float64, np.complex128]
    # blocking ring exchange of typed arrays, all sizes (in bytes)
    for dt in dtypes:
        for nbytes in SIZES:
            n = nbytes // np.dtype(dt).itemsize
            out = expected_array(n, dt, rank, right)
            got = np.full(n, 77, dtype=dt)
            comm.Sendrecv(out, dest=right, sendtag=n, recvbuf=got, source=left, recvtag=n)
            s.check(np.array_equal(got, expected_array(n, dt, left, rank)),
                    "Sendrecv %s[%d] from %d differs" % (np.dtype(dt).name, n, left))
            s.feed(got)

    # many outstanding Isend/Irecv pairs to every peer at once
    n = 200003
    recvs, bufs, sends = [], [], []
    for p in range(size):
        buf = np.zeros(n, dtype=np.float64)
        bufs.append(buf)
        recvs.append(comm.Irecv(buf, source=p, tag=5))
    # Send buffers of non-blocking calls must live until the request
    # completes (mpi4py does not always keep a reference): held in "out".
    out = [expected_array(n, np.float64, rank, p) for p in range(size)]
    for p in range(size):
        sends.append(comm.Isend(out[p], dest=p, tag=5))
    MPI.Request.Waitall(recvs + sends)
    for p in range(size):
        s.check(np.array_equal(bufs[p], expected_array(n, np.float64, p, rank)),
                "Isend/Irecv float64[%d] from %d differs" % (n, p))
        s.feed(bufs[p])

    # synchronous send and a non-contiguous (strided) datatype
    if size > 1:
        a = expected_array(3 * 65536, np.int32, rank, right)
        vec = MPI.INT.Create_vector(65536, 1, 3).Commit()
        got = np.full(65536, -1, dtype=np.int32)
        if rank % 2 == 0:
            comm.Ssend([a, 1, vec], dest=right, tag=11)
            comm.Recv(got, source=left, tag=11)
        else:
            comm.Recv(got, source=left, tag=11)
            comm.Ssend([a, 1, vec], dest=right, tag=11)
        vec.Free()
        s.check(np.array_equal(got, expected_array(3 * 65536, np.int32, left, rank)[::3]),
                "strided Ssend from %d differs" % left)
        s.feed(got)

    # Sendrecv_replace of a large buffer around the ring, size times
    buf = expected_array(1 << 18, np.float64, rank, rank)
    for _ in range(size):
        comm.Sendrecv_replace(buf, dest=right, source=left)
    s.check(np.array_equal(buf, expected_array(1 << 18, np.float64, rank, rank)),
            "Sendrecv_replace around the ring did not come back intact")
    s.feed(buf)
    return s.finish()


# ---------------------------------------------------------------------------
def sec_coll():
    s = Section("coll")
    # object collectives
    obj = comm.bcast(obj_for(0, -1, 11) if rank == 0 else None, root=0)
    s.check(obj == obj_for(0, -1, 11), "bcast object differs")
    s.feed(obj)
    got = comm.scatter([obj_for(0, p, 3) for p in range(size)] if rank == 0 else None, root=0)
    s.check(got == obj_for(0, rank, 3), "scatter object differs")
    s.feed(got)
    got = comm.gather(obj_for(rank, 0, 4), root=0)
    if rank == 0:
        s.check(got == [obj_for(p, 0, 4) for p in range(size)], "gather objects differ")
        s.feed(got)
    got = comm.allgather((rank, "r%d" % rank * rank))
    s.check(got == [(p, "r%d" % p * p) for p in range(size)], "allgather objects differ")
    s.feed(got)
    got = comm.alltoall([(rank, p, list(range(p + rank))) for p in range(size)])
    s.check(got == [(p, rank, list(range(p + rank))) for p in range(size)], "alltoall objects differ")
    s.feed(got)
    got = comm.allreduce(rank + 1, op=MPI.SUM)
    s.check(got == size * (size + 1) // 2, "allreduce object sum is %r" % got)

    # buffer collectives, large enough to be fragmented and pipelined
    n = (1 << 20) + 17
    b = expected_array(n, np.float64, 0, 9) if rank == 0 else np.zeros(n)
    comm.Bcast(b, root=0)
    s.check(np.array_equal(b, expected_array(n, np.float64, 0, 9)), "Bcast float64[%d] differs" % n)
    s.feed(b)

    mine = expected_array(n, np.float64, rank, 0) - 0.25   # integers < 2^50: exact sums
    tot = np.empty(n)
    comm.Allreduce(mine, tot, op=MPI.SUM)
    want = sum(expected_array(n, np.float64, p, 0) - 0.25 for p in range(size))
    s.check(np.array_equal(tot, want), "Allreduce SUM float64[%d] differs" % n)
    s.feed(tot)
    mx = np.empty(n, dtype=np.int32)
    comm.Allreduce(expected_array(n, np.int32, rank, 1), mx, op=MPI.MAX)
    s.check(np.array_equal(mx, expected_array(n, np.int32, size - 1, 1)), "Allreduce MAX int32 differs")
    s.feed(mx)
    red = np.empty(n, dtype=np.int64) if rank == size - 1 else None
    comm.Reduce(np.full(n, rank + 1, dtype=np.int64), red, op=MPI.PROD, root=size - 1)
    if rank == size - 1:
        fact = 1
        for p in range(1, size + 1):
            fact *= p
        s.check(bool(np.all(red == fact)), "Reduce PROD differs")
        s.feed(red)

    m = 65537
    send = np.concatenate([expected_array(m, np.int32, rank, p) for p in range(size)])
    recv = np.empty(m * size, dtype=np.int32)
    comm.Alltoall(send, recv)
    want = np.concatenate([expected_array(m, np.int32, p, rank) for p in range(size)])
    s.check(np.array_equal(recv, want), "Alltoall int32 differs")
    s.feed(recv)

    # Alltoallv with a different count for every pair
    counts = [1000 * (rank + 1) + 37 * p for p in range(size)]
    rcounts = [1000 * (p + 1) + 37 * rank for p in range(size)]
    sdisp = np.cumsum([0] + counts[:-1]).tolist()
    rdisp = np.cumsum([0] + rcounts[:-1]).tolist()
    send = np.concatenate([expected_array(counts[p], np.float64, rank, p) for p in range(size)])
    recv = np.zeros(sum(rcounts))
    comm.Alltoallv([send, (counts, sdisp), MPI.DOUBLE], [recv, (rcounts, rdisp), MPI.DOUBLE])
    want = np.concatenate([expected_array(rcounts[p], np.float64, p, rank) for p in range(size)])
    s.check(np.array_equal(recv, want), "Alltoallv float64 differs")
    s.feed(recv)

    # Gatherv / Scatterv with ragged counts
    counts = [5000 + 11 * p for p in range(size)]
    disp = np.cumsum([0] + counts[:-1]).tolist()
    full = np.concatenate([expected_array(counts[p], np.int32, p, 0) for p in range(size)])
    out = np.zeros(sum(counts), dtype=np.int32) if rank == 0 else None
    comm.Gatherv(expected_array(counts[rank], np.int32, rank, 0),
                 [out, (counts, disp), MPI.INT] if rank == 0 else None, root=0)
    if rank == 0:
        s.check(np.array_equal(out, full), "Gatherv differs")
        s.feed(out)
    part = np.zeros(counts[rank], dtype=np.int32)
    comm.Scatterv([full, (counts, disp), MPI.INT] if rank == 0 else None, part, root=0)
    s.check(np.array_equal(part, expected_array(counts[rank], np.int32, rank, 0)), "Scatterv differs")
    s.feed(part)

    # Allgather, Reduce_scatter_block, Scan, Exscan, non-blocking ones
    ag = np.empty(4096 * size, dtype=np.int32)
    comm.Allgather(expected_array(4096, np.int32, rank, 5), ag)
    s.check(np.array_equal(ag, np.concatenate([expected_array(4096, np.int32, p, 5) for p in range(size)])),
            "Allgather differs")
    s.feed(ag)
    rs = np.empty(3000, dtype=np.int64)
    comm.Reduce_scatter_block(np.arange(3000 * size, dtype=np.int64) + rank, rs, op=MPI.SUM)
    want = (np.arange(3000 * rank, 3000 * (rank + 1), dtype=np.int64) * size
            + size * (size - 1) // 2)
    s.check(np.array_equal(rs, want), "Reduce_scatter_block differs")
    s.feed(rs)
    sc = np.empty(1000, dtype=np.int64)
    comm.Scan(np.full(1000, rank + 1, dtype=np.int64), sc, op=MPI.SUM)
    s.check(bool(np.all(sc == (rank + 1) * (rank + 2) // 2)), "Scan differs")
    ex = np.zeros(1000, dtype=np.int64)
    comm.Exscan(np.full(1000, rank + 1, dtype=np.int64), ex, op=MPI.SUM)
    if rank > 0:
        s.check(bool(np.all(ex == rank * (rank + 1) // 2)), "Exscan differs")
    ib = expected_array(300000, np.uint8, 0, 3) if rank == 0 else np.zeros(300000, dtype=np.uint8)
    ia = np.empty(50000, dtype=np.int64)
    contrib = np.full(50000, rank, dtype=np.int64)   # must outlive the request
    r1 = comm.Ibcast(ib, root=0)
    r2 = comm.Iallreduce(contrib, ia, op=MPI.SUM)
    MPI.Request.Waitall([r1, r2])
    s.check(np.array_equal(ib, expected_array(300000, np.uint8, 0, 3)), "Ibcast differs")
    s.check(bool(np.all(ia == size * (size - 1) // 2)), "Iallreduce differs")
    s.feed(ib)
    s.feed(ia)
    comm.Barrier()
    return s.finish()


# ---------------------------------------------------------------------------
def sec_win():
    s = Section("win")
    n = 1 << 17                      # 1 MiB of float64 per rank
    local = np.full(n * size, -1.0)  # one n-block per origin rank
    win = MPI.Win.Create(local, disp_unit=local.itemsize, comm=comm)

    # Origin buffers must live until the epoch ends (a fence, an unlock):
    # Put and Accumulate may only read them then.  They are kept in "keep".
    keep = []

    # Put: every rank writes its block into slot <rank> of every peer
    win.Fence()
    for p in range(size):
        keep.append(expected_array(n, np.float64, rank, p))
        win.Put(keep[-1], p, target=(rank * n, n, MPI.DOUBLE))
    win.Fence()
    keep.clear()
    for p in range(size):
        s.check(np.array_equal(local[p * n:(p + 1) * n], expected_array(n, np.float64, p, rank)),
                "Put block from %d differs" % p)
    s.feed(local)

    # Get: read the right neighbour's whole window
    got = np.zeros(n * size)
    win.Get(got, right, target=(0, n * size, MPI.DOUBLE))
    win.Fence()
    want = np.concatenate([expected_array(n, np.float64, p, right) for p in range(size)])
    s.check(np.array_equal(got, want), "Get of rank %d's window differs" % right)
    s.feed(got)

    # Accumulate SUM: everybody adds (rank+1)*k into slot 0 of every peer
    win.Fence()
    local[:] = 0.0
    win.Fence()
    add = np.arange(n, dtype=np.float64)
    mine = add * (rank + 1)
    for p in range(size):
        win.Accumulate(mine, p, target=(0, n, MPI.DOUBLE), op=MPI.SUM)
    win.Fence()
    s.check(np.array_equal(local[:n], add * (size * (size + 1) // 2)), "Accumulate SUM differs")
    s.check(bool(np.all(local[n:] == 0.0)), "Accumulate touched data outside its target")
    s.feed(local[:n])
    # local reads above must finish before peers start the next epoch's
    # updates: a fence of its own, as MPI requires
    win.Fence()

    # Accumulate MAX on a small part of the second slot
    mine = np.full(1000, float(rank))
    win.Accumulate(mine, left, target=(n, 1000, MPI.DOUBLE), op=MPI.MAX)
    win.Fence()
    s.check(bool(np.all(local[n:n + 1000] == float(right))), "Accumulate MAX differs")
    win.Fence()

    # passive target: a shared counter, lock / Fetch_and_op / unlock
    counter = np.zeros(1, dtype=np.int64)
    cwin = MPI.Win.Create(counter, disp_unit=counter.itemsize, comm=comm)
    cwin.Fence()
    old = np.zeros(1, dtype=np.int64)
    inc = np.array([rank + 1], dtype=np.int64)
    olds = []
    for _ in range(10):
        cwin.Lock(0, MPI.LOCK_SHARED)
        cwin.Fetch_and_op(inc, old, 0, 0, op=MPI.SUM)
        cwin.Unlock(0)
        olds.append(int(old[0]))
    # the values fetched are distinct partial sums, increasing
    s.check(olds == sorted(set(olds)) and 0 <= olds[0] and olds[-1] < 10 * size * (size + 1) // 2,
            "Fetch_and_op fetched %s" % olds)
    comm.Barrier()
    cwin.Fence()
    if rank == 0:
        s.check(int(counter[0]) == 10 * size * (size + 1) // 2,
                "Fetch_and_op counter is %d" % int(counter[0]))
        s.feed(counter)
    cwin.Fence()
    cwin.Free()
    win.Free()
    return s.finish()


SECTIONS = {"pickle": sec_pickle, "buffer": sec_buffer, "coll": sec_coll, "win": sec_win}


def main():
    wanted = sys.argv[1:] or list(SECTIONS)
    bad = 0
    for name in wanted:
        if name not in SECTIONS:
            if rank == 0:
                print("FAIL unknown section %s" % name, flush=True)
            bad += 1
            continue
        bad += SECTIONS[name]()
    if rank == 0:
        print("%s: %d ranks, %s" % ("ALL PASS" if bad == 0 else "SOME FAILED", size,
                                     MPI.Get_library_version().splitlines()[0]), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
