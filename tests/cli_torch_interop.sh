#!/usr/bin/env bash
# A dtnn checkpoint loads into the matching PyTorch module with load_state_dict and gives the
# same logits; a PyTorch state_dict saved as safetensors runs in dtnn with the same logits.
# The torchvision models (MobileNetV2: depthwise, ReLU6, inverted residuals; DenseNet-121:
# concatenation) load into torchvision's own modules. Skipped (exit 77) without Debian's
# python3-torch; the torchvision models are skipped, with a message, without python3-torchvision.
# Usage: cli_torch_interop.sh DTNN TMPDIR
set -eu
dtnn=$1
tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
py=/usr/bin/python3
if ! [[ -x $py ]] || ! $py -c "import torch, numpy" 2>/dev/null; then
    echo "skipped: Debian's python3-torch is not installed"
    exit 77
fi
models="lenet5 resnet20"
if $py -c "import torchvision" 2>/dev/null; then
    models="$models mobilenet_v2 densenet121 mobilenet_v3_large regnet_y_400mf efficientnet_v2_s
            convnext_tiny"
else
    echo "torchvision models skipped: Debian's python3-torchvision is not installed"
fi
for model in $models; do
    shape=$([[ $model == lenet5 ]] && echo "1, 28, 28" || echo "3, 32, 32")
    # a few training steps first, so batch-norm statistics and weights are not the defaults
    $py - "$tmp" "$shape" <<'P'
import sys, numpy as np
d, shape = sys.argv[1], tuple(int(v) for v in sys.argv[2].split(","))
rng = np.random.default_rng(0)
np.save(f"{d}/train_x.npy", rng.standard_normal((96,) + shape).astype(np.float32))
np.save(f"{d}/train_y.npy", rng.integers(0, 10, 96).astype(np.int64))
P
    "$dtnn" train --model $model --dataset npy --data-dir "$tmp" --epochs 1 --batch-size 32 \
        --optimizer sgd --lr 0.05 --momentum 0.9 --save "$tmp/$model.safetensors" --quiet >/dev/null
    $py -c "import numpy as np; np.save('$tmp/x.npy', np.random.default_rng(1).standard_normal((7, $shape)).astype(np.float32))"
    "$dtnn" predict --model $model --classes 10 --load "$tmp/$model.safetensors" --input "$tmp/x.npy" --output "$tmp/dtnn.npy" >/dev/null
    $py ../tools/torch_interop.py "$tmp/$model.safetensors" $model "$tmp/x.npy" "$tmp/dtnn.npy" "$tmp/torch.safetensors"
    # and back: PyTorch's state_dict, as a plain safetensors file, in dtnn
    "$dtnn" predict --model $model --classes 10 --load "$tmp/torch.safetensors" --input "$tmp/x.npy" --output "$tmp/back.npy" >/dev/null
    $py -c "
import numpy as np, sys
a, b = np.load('$tmp/back.npy'), np.load('$tmp/torch.safetensors.logits.npy')
e = float(np.abs(a - b).max()); tol = 1e-4 * max(1.0, float(np.abs(b).max()))
print(f'$model: PyTorch state_dict in dtnn: max abs error {e:.3g} (tol {tol:.3g}, as torch_interop.py)')
sys.exit(0 if e <= tol else 1)"
done
echo "1 passed, 0 failed"
