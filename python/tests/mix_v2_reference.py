"""Runs torchvision's own v2.MixUp and v2.CutMix (torchvision >= 0.16, under a PyTorch 2.x
interpreter) on unmixed batches with dtnn's draws put in their place: the Beta sample and,
for CutMix, the two torch.randint centres. Reads IN.npz (x, y, classes, and per batch kind,
draw, cx, cy), writes OUT.npz (x and soft labels per batch). Used by test_mix.py."""
import sys
from unittest import mock

import numpy as np
import torch
from torchvision.transforms import v2


class _Draw:
    """Stands for torch.distributions.Beta(alpha, alpha): sample(()) is shape [1], float32."""

    def __init__(self, value):
        self.value = value

    def sample(self, shape=()):
        return torch.tensor([self.value], dtype=torch.float32)


def main(src, dst):
    a = np.load(src)
    out = {}
    for b in range(len(a["kind"])):
        x, y = torch.from_numpy(a[f"x{b}"]), torch.from_numpy(a[f"y{b}"]).long()
        classes = int(a["classes"])
        if a["kind"][b] == 1:
            t = v2.MixUp(alpha=1.0, num_classes=classes)
            t._dist = _Draw(float(a["draw"][b]))
            mx, my = t(x, y)
        else:
            t = v2.CutMix(alpha=1.0, num_classes=classes)
            t._dist = _Draw(float(a["draw"][b]))
            centres = [torch.tensor([int(a["cx"][b])]), torch.tensor([int(a["cy"][b])])]
            with mock.patch("torch.randint", side_effect=centres):
                mx, my = t(x, y)
        out[f"x{b}"], out[f"y{b}"] = mx.numpy(), my.numpy()
    np.savez(dst, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
