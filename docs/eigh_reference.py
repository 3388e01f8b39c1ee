"""numpy.linalg.eigh on the matrices of the finalize benchmark (aggregator/benches/finalize.rs).

Prints the median wall time of eigh on a symmetric p x p matrix (noisy identity, like the
bench's average) for p = 500, 1000, 2000. Run with the BLAS pinned to one thread to compare
with faer on one thread, or unpinned to compare with faer's default:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python3 docs/eigh_reference.py
"""

import time

import numpy as np

rng = np.random.default_rng(1)
for p in (500, 1000, 2000):
    a = rng.normal(0.0, 0.1, (p, p))
    m = (a + a.T) / 2 + np.eye(p)
    times = []
    for _ in range(7 if p < 2000 else 5):
        t = time.perf_counter()
        np.linalg.eigh(m)
        times.append(time.perf_counter() - t)
    print(f"p={p} eigh median {np.median(times) * 1e3:.1f} ms")
