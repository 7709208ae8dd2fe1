"""A hyper-parameter sweep: learning rate x optimizer on Fashion-MNIST, a short run each,
the data loaded once. Every run is a fresh model of the same seed, so the runs differ only
by what is swept."""
import itertools

import dtnn

data = dtnn.datasets.fashion_mnist()
results = []
for lr, name in itertools.product([0.003, 0.01, 0.03], ["sgd", "adamw"]):
    opt = (dtnn.optim.SGD(lr=lr, momentum=0.9) if name == "sgd"
           else dtnn.optim.AdamW(lr=lr / 10))
    model = dtnn.Model("lenet5")
    history = model.fit(data, steps=300, batch_size=64, optimizer=opt, verbose=0)
    results.append((history.history["test_acc"][-1], name, opt.lr))
    print(f"{name:6s} lr {opt.lr:<7g} test accuracy {100 * results[-1][0]:.2f}%", flush=True)
best = max(results)
print(f"best: {best[1]} lr {best[2]:g} ({100 * best[0]:.2f}%)")
