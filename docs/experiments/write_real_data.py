"""Writes the real data sets of the unordered benchmark grid as .npy files.

The data are scikit-learn's bundled copies (no download): the Wisconsin breast cancer
data (569 x 30) and the wine data (178 x 13), rows = observations. The repository
keeps this script, not the data.

Run: python3 docs/experiments/write_real_data.py DIR   (default DIR: /tmp/ldpcov-data)
then: cargo run --release --example reproduce -- unordered \
        --data breast_cancer=DIR/breast_cancer.npy --data wine=DIR/wine.npy
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ldpcov-data"
    os.makedirs(out, exist_ok=True)
    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine)):
        x = np.ascontiguousarray(loader().data, dtype=np.float64)
        path = os.path.join(out, f"{name}.npy")
        np.save(path, x)
        print(f"{path}: {x.shape[0]} rows x {x.shape[1]} columns")


if __name__ == "__main__":
    main()
