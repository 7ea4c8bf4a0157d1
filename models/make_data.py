"""Writes the 8x8 handwritten digits (sklearn's load_digits, shipped with Debian's python3-sklearn) as .npy files.

Outputs under models/data/:
  digits_{train,test}_x.npy   float32 [N,1,8,8], pixel values scaled from 0..16 to [0,1]; train = the first 1500
                              samples, test = the other 297
  digits_{train,test}_y.npy   int64   [N]
  digits_flat_{train,test}_x.npy   float32 [N,64]: the same pixels flattened, for the MLP
The labels are shared by both layouts (digits_flat_* use digits_*_y.npy).
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

N_TRAIN = 1500


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    digits = load_digits()
    x = (digits.images.astype(np.float64) / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    flat = x.reshape(-1, 64)
    arrays = {
        "digits_train_x": x[:N_TRAIN],
        "digits_train_y": y[:N_TRAIN],
        "digits_test_x": x[N_TRAIN:],
        "digits_test_y": y[N_TRAIN:],
        "digits_flat_train_x": flat[:N_TRAIN],
        "digits_flat_test_x": flat[N_TRAIN:],
    }
    for name in sorted(arrays):
        np.save(os.path.join(out_dir, name + ".npy"), np.ascontiguousarray(arrays[name]))
    print(f"wrote {len(arrays)} arrays to {out_dir}: {x.shape[0]} samples, {N_TRAIN} train", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
