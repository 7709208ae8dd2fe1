"""A layer written in Python (a learned per-channel scale and shift after a convolution),
checked by the library's finite-difference check and trained beside built-in layers."""
import dtnn


class ScaleShift(dtnn.Layer):
    def infer(self, shape):
        return shape, {"gain": ((shape[0],), "ones"), "shift": ((shape[0],), "zeros")}

    def forward(self, inputs, params, training):
        return (inputs[0] * params["gain"][None, :, None, None] +
                params["shift"][None, :, None, None])

    def backward(self, inputs, params, y, dy):
        gain = params["gain"][None, :, None, None]
        return [dy * gain], {"gain": (dy * inputs[0]).sum(axis=(0, 2, 3)),
                             "shift": dy.sum(axis=(0, 2, 3))}


print("gradient check:", dtnn.gradcheck(ScaleShift(), (4, 6, 6)))

net = dtnn.Sequential(input_shape=(1, 28, 28))
net.add("conv2d", name="conv", filters=8, kernel=3, padding=1)
net.add(ScaleShift(), name="affine")
net.add("relu")
net.add("maxpool", kernel=2)
net.add("flatten")
net.add("linear", name="fc", outputs=10)
model = net.build()
data = dtnn.datasets.fashion_mnist()
history = model.fit(data, steps=200, batch_size=64, optimizer=dtnn.optim.Adam(lr=0.002))
print("learned gains:", model.state_dict()["affine.gain"])
