"""environment.yml and pyproject.toml declare the same dependencies; pins agree with constraints."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {norm(r) for r in py["dependencies"]}
    for extra in py["optional-dependencies"].values():
        declared |= {norm(r) for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    in_env = {norm(r) for r in pip if not r.startswith("-e")}
    assert declared == in_env


def test_pins_agree_with_constraints():
    pins = {
        norm(line) for line in (ROOT / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")
    }
    assert {"torch==2.13.0", "torchvision==0.28.0"} <= pins
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {"torch==2.13.0", "torchvision==0.28.0"} <= {norm(r) for r in py["dependencies"]}


def test_torchvision_imports_through_compat():
    from pflkit._compat import import_torchvision

    tv = import_torchvision()
    assert tv.__version__.startswith("0.28")
    assert hasattr(tv.models, "resnet18")
