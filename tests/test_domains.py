import math

import numpy as np
import pytest
import torch

from meanfield.domains import Ball, Box, make_domain


@pytest.mark.parametrize("dom", [Box(3, 1.5), Ball(3, 1.5)])
def test_projection_is_the_nearest_point(dom, rng):
    # independent truth: the projection onto a convex set is idempotent and the residual makes
    # a non-acute angle with every direction into the set (variational inequality)
    pts = torch.tensor(rng.normal(scale=3, size=(400, 3)))
    proj = dom.project(pts)
    assert bool(dom.contains(proj, atol=1e-12).all())
    assert torch.allclose(dom.project(proj), proj)
    inner = dom.project(torch.tensor(rng.normal(scale=3, size=(400, 3))))
    ip = ((pts - proj)[:, None, :] * (inner[None, :, :] - proj[:, None, :])).sum(-1)
    assert ip.max() <= 1e-10
    # numpy and torch agree
    assert np.allclose(dom.project(pts.numpy()), proj.numpy())


def test_volumes():
    assert Box(3, 2.0).volume == pytest.approx(64.0)
    assert Ball(2, 2.0).volume == pytest.approx(4 * math.pi)
    assert Ball(3, 1.0).volume == pytest.approx(4 / 3 * math.pi)
    assert Ball(1, 1.0).volume == pytest.approx(2.0)


def test_contains():
    b = Ball(2, 1.0)
    assert b.contains(torch.tensor([[0.6, 0.8], [0.8, 0.8]])).tolist() == [True, False]
    assert Box(2, 1.0).contains(np.array([[1.0, -1.0], [1.0, 1.01]])).tolist() == [True, False]


@pytest.mark.parametrize("R", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_radius(R):
    with pytest.raises(ValueError, match="radius|half_width"):
        Box(2, R)
    with pytest.raises(ValueError, match="radius"):
        Ball(2, R)


def test_bad_dim_and_kind():
    with pytest.raises(ValueError, match="dim"):
        Ball(0, 1.0)
    with pytest.raises(ValueError, match="domain"):
        make_domain("sphere", 2, 1.0)
    with pytest.raises(ValueError, match="last dimension 2"):
        Ball(2, 1.0).project(torch.zeros(3, 3))
