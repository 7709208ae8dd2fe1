#!/usr/bin/python3
"""gen_erase_reference.py -- the table of tests/test_erase.c: the box size of one try of
torchvision's RandomErasing.get_params (torchvision 0.14, Debian's python3-torchvision) for
fixed draws. Run: /usr/bin/python3 tools/gen_erase_reference.py, and paste its lines."""
import torch
import torchvision.transforms as T

# torchvision 0.14's RandomErasing.get_params itself, its first try's draws replaced by fixed
# fractions (torch.empty(1).uniform_(lo, hi) -> lo + (hi - lo) * u, float32 as torch's); a
# second try (the first box did not fit) is reported as 0 x 0.
cases = [(32, 32, 0.0, 0.0), (32, 32, 0.5, 0.5), (32, 32, 0.999, 0.5), (28, 28, 0.25, 0.9),
         (28, 28, 0.75, 0.1), (224, 224, 0.1, 0.3), (224, 224, 0.9, 0.99), (7, 9, 0.3, 0.2),
         (10, 40, 0.6, 0.05), (40, 10, 0.6, 0.95), (5, 5, 0.01, 0.5), (3, 3, 0.9, 0.5),
         (4, 4, 0.95, 0.02), (6, 6, 0.99, 0.999)]
real_empty, real_randint = torch.empty, torch.randint


class Retry(Exception):
    pass


for h, w, us, ur in cases:
    draws = [us, ur]
    class E:
        def uniform_(self, lo, hi):
            if not draws: raise Retry()
            u = draws.pop(0)
            return torch.tensor([float(lo) + (float(hi) - float(lo)) * u], dtype=torch.float32)
    torch.empty = lambda *a, **k: E() if a == (1,) else real_empty(*a, **k)
    torch.randint = lambda lo, hi, size: torch.tensor([lo])
    try:
        _, _, eh, ew, _ = T.RandomErasing.get_params(torch.zeros(3, h, w), scale=(0.02, 0.33),
                                                     ratio=(0.3, 3.3), value=[0])
    except Retry:
        eh, ew = 0, 0
    finally:
        torch.empty, torch.randint = real_empty, real_randint
    print(f"        {{{h}, {w}, {us}, {ur}, {eh}, {ew}}},")
