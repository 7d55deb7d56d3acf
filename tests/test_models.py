import pytest
import torch

from pflkit.models import build_model, n_params


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
@pytest.mark.parametrize("width,k", [("S", 8), ("M", 16), ("L", 32)])
def test_lenet_widths(shape, width, k):
    m = build_model("lenet", shape, 10, width)
    assert m.body[0].out_channels == k and m.body[3].out_channels == 2 * k
    assert m(torch.zeros(4, *shape)).shape == (4, 10)
    assert [n for n, _ in m.named_parameters()][-2:] == ["head.weight", "head.bias"]


@pytest.mark.parametrize("name", ["fedavg-cnn", "mlp"])
def test_other_models(name):
    m = build_model(name, (1, 28, 28), 7)
    assert m(torch.zeros(2, 1, 28, 28)).shape == (2, 7)


def test_deep_mlp_names_count_their_linear_layers():
    m = build_model("mlp8x256", (1, 28, 28), 10)
    linears = [x for x in m.modules() if isinstance(x, torch.nn.Linear)]
    assert len(linears) == 8 and all(x.out_features == 256 for x in linears[:-1]) and m.head is linears[-1]
    assert n_params(m) == (784 * 256 + 256) + 6 * (256 * 256 + 256) + (256 * 10 + 10)
    with pytest.raises(Exception, match="L >= 2"):
        build_model("mlp1x256", (1, 28, 28), 10)


@pytest.mark.parametrize("name,millions", [("alexnet-64", 20.13), ("resnet18-64", 11.17), ("alexnet-16", 0.23)])
def test_small_image_alexnet_and_resnet(name, millions):
    m = build_model(name, (1, 28, 28), 10)
    assert m(torch.zeros(2, 1, 28, 28)).shape == (2, 10) and isinstance(m.head, torch.nn.Linear)
    assert round(n_params(m) / 1e6, 2) == millions


def test_fedavg_cnn_size():
    # McMahan et al. (2017), §3: "a CNN with two 5x5 convolution layers ... 1,663,370 total parameters"
    assert n_params(build_model("fedavg-cnn", (1, 28, 28), 10)) == 1_663_370


def test_torchvision_model_split():
    m = build_model("resnet18", (1, 32, 32), 5)
    assert m(torch.zeros(2, 1, 32, 32)).shape == (2, 5)
    assert isinstance(m.head, torch.nn.Linear) and m.head.out_features == 5
