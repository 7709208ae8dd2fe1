"""Fashion-MNIST in ten lines: the README's `make demo` training, from Python.
Run: python3 quickstart.py          (2 ranks: mpirun -np 2 python3 quickstart.py)"""
import dtnn

data = dtnn.datasets.fashion_mnist()
model = dtnn.Model("lenet5")
model.fit(data, epochs=2, batch_size=32, optimizer=dtnn.optim.AdamW(lr=0.002),
          schedule="cosine", save="lenet5.safetensors", log="lenet5.jsonl")
metrics = model.evaluate(data)
if dtnn.distributed.is_main():
    print(f"test accuracy: {100 * metrics['accuracy']:.2f}%")
