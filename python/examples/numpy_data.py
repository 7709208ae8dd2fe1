"""Training on NumPy arrays of your own: float32 NCHW images and integer labels.

Here the arrays are made up (two classes of noisy stripes); in practice they come from
np.load, a DataFrame, an HDF5 file... Normalise them as you want the model to see them.
"""
import numpy as np

import dtnn

rng = np.random.default_rng(0)
n = 2048
labels = rng.integers(0, 2, n)
images = rng.normal(0.0, 0.5, (n, 1, 16, 16)).astype(np.float32)
images[labels == 0, :, ::4, :] += 1.0      # class 0: horizontal stripes
images[labels == 1, :, :, ::4] += 1.0      # class 1: vertical stripes

net = dtnn.Sequential(input_shape=(1, 16, 16))
net.add("conv2d", name="conv", filters=8, kernel=3, padding=1)
net.add("relu")
net.add("maxpool", kernel=2)
net.add("flatten")
net.add("linear", name="fc", outputs=2)
model = net.build(seed=1)

split = n * 3 // 4
history = model.fit(images[:split], labels[:split], epochs=3, batch_size=64,
                    optimizer=dtnn.optim.SGD(lr=0.05, momentum=0.9),
                    validation_data=(images[split:], labels[split:]), verbose=0)
print("validation accuracy per epoch:", [round(a, 4) for a in history.history["test_acc"]])
logits = model.predict(images[split:split + 5])
print("predicted:", logits.argmax(axis=1), "true:", labels[split:split + 5])
