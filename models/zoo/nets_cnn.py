"""Image classifiers of the papers' benchmarks, written out (no torchvision on these machines).

ResNet/WResNet: bottleneck ResNets as in He et al. (and torchvision's resnet50/101/152: 7x7/2 stem, 3x3/2 max pool,
stages of [3,4,6,3] / [3,4,23,3] / [3,8,36,3] bottlenecks, stride on the 3x3 conv, projection shortcut where the
shape changes, global average pool, fc). WResNet-D-K (Tofu, Table 2) multiplies the width of *every* convolution by
the widening factor K (stem 64K, stage widths 64K..512K, block outputs 4x that): ResNet-152 has 60M parameters,
WResNet-152-10 about 100x as many (5.8G, 23 GB of float32). AlexNet (the one-weird-trick variant torchvision uses),
VGG16 (configuration D, no batch norm) and Inception-v3 (torchvision's structure without the auxiliary head) are
the FlexFlow/ParaDL image models. Every net ends in logits; the loss is added by generate.py.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

RESNET_BLOCKS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3]}


def _c(channels, w):
    """A width scaled by w (which may be a fraction for tiny variants), at least 1."""
    return max(1, int(channels * w))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """blocks: bottlenecks per stage; base: stem width (64 in the papers, times the widening factor)."""

    def __init__(self, blocks, base=64, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        stages, cin = [], base
        for i, n in enumerate(blocks):
            width = base * 2 ** i
            layer = []
            for j in range(n):
                layer.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = 4 * width
            stages.append(nn.Sequential(*layer))
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        h = self.layers(h)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


def alexnet(classes=1000, w=1, spatial=6, fc=4096):
    """spatial: side of the last feature map (6 at 224x224)."""
    c = [_c(64, w), _c(192, w), _c(384, w), _c(256, w), _c(256, w)]
    return nn.Sequential(
        nn.Conv2d(3, c[0], 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(),
        nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(),
        nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Dropout(0.5), nn.Linear(c[4] * spatial * spatial, fc), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(fc, fc), nn.ReLU(), nn.Linear(fc, classes))


def vgg16(classes=1000, w=1, spatial=7, fc=4096):
    """Configuration D; spatial: side of the last feature map (7 at 224x224)."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers, cin = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, _c(v, w), 3, padding=1), nn.ReLU()]
            cin = _c(v, w)
    layers += [nn.Flatten(), nn.Linear(cin * spatial * spatial, fc), nn.ReLU(), nn.Dropout(0.5),
               nn.Linear(fc, fc), nn.ReLU(), nn.Dropout(0.5), nn.Linear(fc, classes)]
    return nn.Sequential(*layers)


class BasicConv(nn.Module):
    def __init__(self, cin, cout, k, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class InceptionA(nn.Module):
    def __init__(self, cin, pool, w):
        super().__init__()
        self.b1 = BasicConv(cin, _c(64, w), 1)
        self.b5 = nn.Sequential(BasicConv(cin, _c(48, w), 1), BasicConv(_c(48, w), _c(64, w), 5, padding=2))
        self.b3 = nn.Sequential(BasicConv(cin, _c(64, w), 1), BasicConv(_c(64, w), _c(96, w), 3, padding=1),
                                BasicConv(_c(96, w), _c(96, w), 3, padding=1))
        self.bp = BasicConv(cin, _c(pool, w), 1)
        self.cout = _c(64, w) + _c(64, w) + _c(96, w) + _c(pool, w)

    def forward(self, x):
        p = self.bp(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), p], 1)


class InceptionB(nn.Module):  # grid reduction 35 -> 17
    def __init__(self, cin, w):
        super().__init__()
        self.b3 = BasicConv(cin, _c(384, w), 3, stride=2)
        self.bd = nn.Sequential(BasicConv(cin, _c(64, w), 1), BasicConv(_c(64, w), _c(96, w), 3, padding=1),
                                BasicConv(_c(96, w), _c(96, w), 3, stride=2))
        self.cout = cin + _c(384, w) + _c(96, w)

    def forward(self, x):
        return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):  # factorised 7x7
    def __init__(self, cin, c7, w):
        super().__init__()
        c7 = _c(c7, w)
        self.b1 = BasicConv(cin, _c(192, w), 1)
        self.b7 = nn.Sequential(BasicConv(cin, c7, 1), BasicConv(c7, c7, (1, 7), padding=(0, 3)),
                                BasicConv(c7, _c(192, w), (7, 1), padding=(3, 0)))
        self.bd = nn.Sequential(BasicConv(cin, c7, 1), BasicConv(c7, c7, (7, 1), padding=(3, 0)),
                                BasicConv(c7, c7, (1, 7), padding=(0, 3)), BasicConv(c7, c7, (7, 1), padding=(3, 0)),
                                BasicConv(c7, _c(192, w), (1, 7), padding=(0, 3)))
        self.bp = BasicConv(cin, _c(192, w), 1)
        self.cout = 4 * _c(192, w)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.bd(x), self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionD(nn.Module):  # grid reduction 17 -> 8
    def __init__(self, cin, w):
        super().__init__()
        self.b3 = nn.Sequential(BasicConv(cin, _c(192, w), 1), BasicConv(_c(192, w), _c(320, w), 3, stride=2))
        self.b7 = nn.Sequential(BasicConv(cin, _c(192, w), 1),
                                BasicConv(_c(192, w), _c(192, w), (1, 7), padding=(0, 3)),
                                BasicConv(_c(192, w), _c(192, w), (7, 1), padding=(3, 0)),
                                BasicConv(_c(192, w), _c(192, w), 3, stride=2))
        self.cout = cin + _c(320, w) + _c(192, w)

    def forward(self, x):
        return torch.cat([self.b3(x), self.b7(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):  # expanded filter bank
    def __init__(self, cin, w):
        super().__init__()
        self.b1 = BasicConv(cin, _c(320, w), 1)
        self.b3 = BasicConv(cin, _c(384, w), 1)
        self.b3a = BasicConv(_c(384, w), _c(384, w), (1, 3), padding=(0, 1))
        self.b3b = BasicConv(_c(384, w), _c(384, w), (3, 1), padding=(1, 0))
        self.bd = nn.Sequential(BasicConv(cin, _c(448, w), 1), BasicConv(_c(448, w), _c(384, w), 3, padding=1))
        self.bda = BasicConv(_c(384, w), _c(384, w), (1, 3), padding=(0, 1))
        self.bdb = BasicConv(_c(384, w), _c(384, w), (3, 1), padding=(1, 0))
        self.bp = BasicConv(cin, _c(192, w), 1)
        self.cout = _c(320, w) + 4 * _c(384, w) + _c(192, w)

    def forward(self, x):
        h3, hd = self.b3(x), self.bd(x)
        return torch.cat([self.b1(x), self.b3a(h3), self.b3b(h3), self.bda(hd), self.bdb(hd),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)


class InceptionV3(nn.Module):
    """299x299 input at full size. w scales every width (tiny: w=1/16 and one block per kind, `full` False)."""

    def __init__(self, classes=1000, w=1, full=True):
        super().__init__()
        self.stem = nn.Sequential(BasicConv(3, _c(32, w), 3, stride=2), BasicConv(_c(32, w), _c(32, w), 3),
                                  BasicConv(_c(32, w), _c(64, w), 3, padding=1), nn.MaxPool2d(3, 2),
                                  BasicConv(_c(64, w), _c(80, w), 1), BasicConv(_c(80, w), _c(192, w), 3),
                                  nn.MaxPool2d(3, 2))
        blocks, c = [], _c(192, w)
        for pool in ([32, 64, 64] if full else [32]):
            blocks.append(InceptionA(c, pool, w))
            c = blocks[-1].cout
        blocks.append(InceptionB(c, w))
        c = blocks[-1].cout
        for c7 in ([128, 160, 160, 192] if full else [128]):
            blocks.append(InceptionC(c, c7, w))
            c = blocks[-1].cout
        blocks.append(InceptionD(c, w))
        c = blocks[-1].cout
        for _ in range(2 if full else 1):
            blocks.append(InceptionE(c, w))
            c = blocks[-1].cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        h = self.blocks(self.stem(x))
        return self.fc(F.dropout(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1), 0.5, self.training))
