"""The kernel peers' one timing rule, the same as bench/best_time.h: the best of `reps` calls after
one warm-up, in milliseconds (best, not median: on a shared machine the fastest run is the one
least disturbed)."""
import time


def best_ms(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3
