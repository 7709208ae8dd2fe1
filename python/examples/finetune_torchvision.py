"""Fine-tuning from a torchvision checkpoint: dtnn's zoo has torchvision's names and
shapes, so a state_dict loads as it is; the new head keeps its fresh initialisation.

    python3 finetune_torchvision.py [resnet18.pth]

Without a file it saves a torchvision resnet18 of random weights first (this machine may
have no internet to download the pretrained ones; the route is the same).
"""
import sys

import numpy as np
import torch
import torchvision

import dtnn

if len(sys.argv) > 1:
    state = torch.load(sys.argv[1], map_location="cpu")
else:
    state = torchvision.models.resnet18().state_dict()

classes = 5
model = dtnn.Model("resnet18", classes=classes, input_shape=(3, 64, 64))
# Everything but the 1000-class head, which keeps dtnn's initialisation for 5 classes.
model.load_state_dict({k: v for k, v in state.items() if not k.startswith("fc.")},
                      strict=False)

rng = np.random.default_rng(0)
x = rng.standard_normal((128, 3, 64, 64)).astype(np.float32)
y = rng.integers(0, classes, 128)
history = model.fit(x, y, epochs=1, batch_size=32, optimizer=dtnn.optim.SGD(
    lr=0.01, momentum=0.9, weight_decay=1e-4), verbose=0)
print(f"1 epoch: train loss {history.history['train_loss'][0]:.4f}")
model.save("resnet18_finetuned.safetensors")
