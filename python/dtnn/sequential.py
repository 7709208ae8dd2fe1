"""Sequential: a model written layer by layer in Python, as a model file would declare it.

    net = dtnn.Sequential(input_shape=(1, 28, 28))
    net.add("conv2d", name="conv1", filters=6, kernel=5, padding=2)
    net.add("relu")
    ...
    model = net.build()            # a dtnn.Model, built from net.to_text()

Each add() is one [section] of the model-file format (`dtnn models --layers` lists the
types, the README their options); keyword values become the file's values (True/False,
tuples as 3x3, inputs as a list of earlier layer names). The text is what the library
parses, so a Sequential is exactly the model file it prints. A dtnn.Layer instance (a layer
written in Python) can be added too: such a network is built by the library's calls rather
than from a file (it has none).
"""
from .layers import Layer
from .model import Model


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "x".join(str(int(e)) for e in v)
    return str(v)


class Sequential:
    def __init__(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"input_shape is (C, H, W), got {input_shape!r}")
        self.input_shape = tuple(int(s) for s in input_shape)
        self.layers = []

    def add(self, type, name=None, inputs=None, **options):
        """Appends a layer: a type name with its options, or a dtnn.Layer. Returns the name
        (give one to a layer that a later one takes as an input)."""
        if isinstance(type, Layer) and options:
            raise ValueError("a Python layer takes its settings in its constructor")
        for key, value in options.items():
            if "\n" in str(value) or "=" in key:
                raise ValueError(f"{type}: option {key!r} = {value!r} cannot be written")
        self.layers.append((type, name, inputs, options))
        return name

    def to_text(self):
        """The model file."""
        if self._python_layers():
            raise ValueError("a network with Python layers has no model file")
        lines = ["[input]", "shape = " + "x".join(str(s) for s in self.input_shape)]
        for type, name, inputs, options in self.layers:
            lines += ["", f"[{type}]"]
            if name is not None:
                lines.append(f"name = {name}")
            if inputs is not None:
                lines.append("inputs = " + ", ".join([inputs] if isinstance(inputs, str)
                                                      else inputs))
            lines += [f"{k} = {_value(v)}" for k, v in options.items()]
        return "\n".join(lines) + "\n"

    def build(self, **kwargs):
        """A dtnn.Model of this network (keywords as Model's: device, seed, ...)."""
        if self._python_layers():
            layers = [(t, n, i, " ".join(f"{k}={_value(v)}" for k, v in o.items()))
                      for t, n, i, o in self.layers]
            return Model._from_layers(self.input_shape, layers, **kwargs)
        return Model.from_text(self.to_text(), origin="<Sequential>", **kwargs)

    def _python_layers(self):
        return [t for t, _, _, _ in self.layers if isinstance(t, Layer)]
