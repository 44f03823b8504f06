"""Prints the comm benchmark's comparison table: for each size, allreduce algorithm bandwidth
(bytes / time; equal to nccl-tests' busbw with 2 ranks) of dsx over shm (buffers in its shared host
memory, as the engine's, and ordinary buffers) and over tcp, OpenMPI over its
shared memory (vader) and over tcp, torch gloo (tcp), and one core's memcpy bandwidth - each the
median over the rounds - with dsx's ratios to the best peer and to memcpy. dsx over shm is
compared with the best of all peers, dsx over tcp with the best peer that also goes through tcp.
Usage: python3 compare.py DIR ROUNDS
       (DIR holds run.sh's dsx_shm.N dsx_shm_ordinary.N dsx_tcp.N mpi.N mpi_tcp.N gloo.N memcpy.N)"""
import statistics
import sys


def read_dsx(path):
    """`dsx bench comm` rows: size count type redop time(us) algbw busbw #wrong."""
    rows = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        rows[int(f[0])] = (float(f[5]), f[7])
    return rows


def read_pairs(path, as_time):
    rows = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) == 2 and f[0].isdigit():
                size, value = int(f[0]), float(f[1])
                rows[size] = size / (value * 1e-6) / 1e9 if as_time else value
    except FileNotFoundError:
        pass
    return rows


def fmt(v):
    return f"{v:8.3f}" if v is not None else "     n/a"


def median_rounds(rows_per_round):
    """{size: median over rounds} of {size: value} dicts; dsx rows keep 'ok' only if all were."""
    sizes = set().union(*rows_per_round) if rows_per_round else set()
    out = {}
    for size in sizes:
        values = [r[size] for r in rows_per_round if size in r]
        if isinstance(values[0], tuple):
            out[size] = (statistics.median(v[0] for v in values), "0" if all(v[1] == "0" for v in values) else "x")
        else:
            out[size] = statistics.median(values)
    return out


def main():
    d, rounds = sys.argv[1], int(sys.argv[2])
    each = range(1, rounds + 1)
    shm = median_rounds([read_dsx(f"{d}/dsx_shm.{i}") for i in each])
    plain = median_rounds([read_dsx(f"{d}/dsx_shm_ordinary.{i}") for i in each])
    tcp = median_rounds([read_dsx(f"{d}/dsx_tcp.{i}") for i in each])
    mpi = median_rounds([read_pairs(f"{d}/mpi.{i}", True) for i in each])
    mpi_tcp = median_rounds([read_pairs(f"{d}/mpi_tcp.{i}", True) for i in each])
    gloo = median_rounds([read_pairs(f"{d}/gloo.{i}", True) for i in each])
    copy = median_rounds([read_pairs(f"{d}/memcpy.{i}", False) for i in each])
    print("| size | dsx shm | dsx shm, ordinary buffers | dsx tcp | OpenMPI vader | OpenMPI tcp | torch gloo | memcpy | "
          "shm / best peer | ordinary / best peer | tcp / best tcp peer | shm / memcpy | ordinary / memcpy | check |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    best_of = lambda *values: max((v for v in values if v), default=None)
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"
    for size in sorted(shm):
        s, o, t = shm[size][0], plain.get(size, (None, ""))[0], tcp.get(size, (None, ""))[0]
        best = best_of(mpi.get(size), mpi_tcp.get(size), gloo.get(size))
        best_tcp = best_of(mpi_tcp.get(size), gloo.get(size))
        c = copy.get(size)
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        checks = [shm[size][1], plain.get(size, (0, "0"))[1], tcp.get(size, (0, "0"))[1]]
        ok = "ok" if all(x == "0" for x in checks) else "WRONG"
        print(f"| {label} | {fmt(s)} | {fmt(o)} | {fmt(t)} | {fmt(mpi.get(size))} | {fmt(mpi_tcp.get(size))} | "
              f"{fmt(gloo.get(size))} | {fmt(c)} | {ratio(s, best)} | {ratio(o, best)} | {ratio(t, best_tcp)} | "
              f"{ratio(s, c)} | {ratio(o, c)} | {ok} |")
    print("\nGB/s = bytes / time per allreduce (fp32 sum, 2 ranks; busbw = algbw for 2 ranks).")


if __name__ == "__main__":
    main()
