"""PyTorch twins of dtnn's zoo models (src/model/zoo.c), for the benchmarks that put dtnn and
PyTorch side by side: same layers, shapes and parameter counts."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    def __init__(self, classes=10, channels=1):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class CifarCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv4 = nn.Conv2d(64, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 8 * 8, 512)
        self.fc2 = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.max_pool2d(F.relu(self.conv4(F.relu(self.conv3(x)))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class BasicBlock(nn.Module):
    """Option-A shortcut (strided, zero-padded channels), as dtnn's shortcut_a layer."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride = stride
        self.pad = (planes - in_planes) // 2
        self.extra = planes - in_planes - self.pad
        self.project = stride != 1 or in_planes != planes

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x
        if self.project:
            sc = F.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, self.pad, self.extra))
        return F.relu(out + sc)


class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, in_planes = [], 16
        for stage in range(3):
            planes = 16 << stage
            for i in range(3):
                layers.append(BasicBlock(in_planes, planes, 2 if stage > 0 and i == 0 else 1))
                in_planes = planes
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class VGG16_64(nn.Module):
    """VGG-16's conv stack on 3x64x64, fc 2048-512-512-200, torchvision's module names."""

    CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M"]

    def __init__(self, classes=200):
        super().__init__()
        layers, c = [], 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(2048, 512), nn.ReLU(inplace=True),
                                        nn.Linear(512, 512), nn.ReLU(inplace=True),
                                        nn.Linear(512, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


# name -> (constructor, input shape C, H, W)
MODELS = {
    "lenet5": (LeNet5, (1, 28, 28)),
    "cifarcnn": (CifarCNN, (3, 32, 32)),
    "resnet20": (ResNet20, (3, 32, 32)),
    "vgg16-64": (VGG16_64, (3, 64, 64)),
}

# torchvision's ImageNet models are dtnn's zoo models of the same names (test_zoo.c checks it).
try:
    import torchvision

    for _name in ("alexnet", "vgg11", "vgg16", "vgg11_bn", "vgg16_bn", "resnet18", "resnet34",
                  "resnet50", "mobilenet_v2", "densenet121"):
        MODELS[_name] = (getattr(torchvision.models, _name), (3, 224, 224))
except ImportError:
    pass
