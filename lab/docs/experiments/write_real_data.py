"""Writes the real data sets of the unordered benchmark grid as .npy files.

The data are scikit-learn's bundled copies (no download): the Wisconsin breast cancer
data (569 x 30) and the wine data (178 x 13), rows = observations. The repository
keeps this script, not the data.

With --held-out it writes instead the bundled data sets the grid and the defaults
were never tuned on, for the out-of-sample check of lab/docs/REPRODUCTION.md §6: diabetes
(442 x 10), digits (1797 x 61: the 3 pixel columns that are constant are dropped, their
correlations being undefined), iris (150 x 4) and linnerud (20 x 6: its three exercise
and three physiological variables side by side; added as a fourth held-out set when
the trivial candidates and the spectral-norm guard were measured).

Run: python3 lab/docs/experiments/write_real_data.py [--held-out] DIR
     (default DIR: /tmp/ldpcov-data, or /tmp/ldpcov-held-out with --held-out)
then: cargo run --release -p ldpcov-lab --example reproduce -- unordered \
        --data breast_cancer=DIR/breast_cancer.npy --data wine=DIR/wine.npy
"""
import os
import sys

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    load_linnerud,
    load_wine,
)


def load_linnerud_joined():
    """Linnerud's exercise and physiological variables as one 20 x 6 table."""
    both = load_linnerud()

    class Joined:
        data = np.hstack([both.data, both.target])

    return Joined


def main():
    args = [a for a in sys.argv[1:] if a != "--held-out"]
    held_out = "--held-out" in sys.argv[1:]
    default_dir = "/tmp/ldpcov-held-out" if held_out else "/tmp/ldpcov-data"
    out = args[0] if args else default_dir
    os.makedirs(out, exist_ok=True)
    if held_out:
        sets = (
            ("diabetes", load_diabetes),
            ("digits", load_digits),
            ("iris", load_iris),
            ("linnerud", load_linnerud_joined),
        )
    else:
        sets = (("breast_cancer", load_breast_cancer), ("wine", load_wine))
    for name, loader in sets:
        x = np.asarray(loader().data, dtype=np.float64)
        x = np.ascontiguousarray(x[:, x.std(axis=0) > 0])
        path = os.path.join(out, f"{name}.npy")
        np.save(path, x)
        print(f"{path}: {x.shape[0]} rows x {x.shape[1]} columns")


if __name__ == "__main__":
    main()
