#!/usr/bin/env python3
"""winograd_bf16_error.py -- how far Winograd's products in bf16 would move --precision bf16.

dtnn's bf16 (include/dtnn.h) is PyTorch's autocast: operands rounded to bf16, exact products,
fp32 sums, the convolution's result rounded to bf16. Winograd computes a 3x3 convolution from
transformed tiles (U = G g G^T, V = B^T d B); multiplying those on vdpbf16ps means rounding U
and V to bf16 as well, which the definition does not do. This script measures what that costs
per output against the exact result of the same bf16 operands, in float64, for F(2x2, 3x3)
and F(4x4, 3x3) over C input channels: the error in units of the output's own bf16 step
(2^-8 of |y|: the definition's one rounding) and relative to sum |x w|.

Usage: python3 tools/winograd_bf16_error.py [--trials N] [--seed S]   (NumPy only)
"""
import argparse

import numpy as np

# Lavin and Gray's matrices (the ones src/backend/cpu/conv_winograd_transforms.c uses)
F2 = dict(m=2,
          BT=[[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
          G=[[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
          AT=[[1, 1, 1, 0], [0, 1, -1, -1]])
F4 = dict(m=4,
          BT=[[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
          G=[[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
             [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
          AT=[[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
              [0, 1, -1, 8, -8, 1]])


def bf16(x):
    """x rounded to the nearest bfloat16, ties to even (as dtnn's cpu_round_bf16)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def trial(f, channels, rng):
    m = f['m']
    a = m + 2
    BT, G, AT = (np.array(f[k], np.float64) for k in ('BT', 'G', 'AT'))
    d = bf16(rng.standard_normal((channels, a, a)))
    g = bf16(rng.standard_normal((channels, 3, 3)) * 0.1)
    exact = np.empty((m, m))
    magnitude = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            prod = d[:, i:i + 3, j:j + 3] * g
            exact[i, j] = prod.sum()
            magnitude[i, j] = np.abs(prod).sum()
    # the transforms in fp32, their results rounded to bf16, products summed exactly
    v = bf16(np.einsum('ij,cjk,lk->cil', BT, d, BT).astype(np.float32))
    u = bf16(np.einsum('ij,cjk,lk->cil', G, g, G).astype(np.float32))
    y = AT @ (u * v).sum(axis=0) @ AT.T
    err = np.abs(y - exact)
    return (err / (np.abs(exact) * 2.0 ** -8)).max(), (err / magnitude).max()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--trials', type=int, default=200)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print('tile     C    steps: median  worst-of-trials   err/sum|xw|: median  worst')
    for channels in (16, 64, 256):
        for f in (F2, F4):
            steps, rel = zip(*(trial(f, channels, rng) for _ in range(args.trials)))
            print(f"F({f['m']}x{f['m']}) {channels:4d}   {np.median(steps):13.1f}  "
                  f"{np.max(steps):15.1f}   {np.median(rel):19.2e}  {np.max(rel):.2e}")


if __name__ == '__main__':
    main()
