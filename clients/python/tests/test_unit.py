"""What needs no daemon: the packing, URLs, arguments."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcov
from ldpcov._client import _target
from ldpcov.v1 import ldpcov_pb2 as pb


def test_unpack_upper_triangle_is_row_major_and_symmetric():
    m = ldpcov.unpack_upper_triangle([1, 2, 3, 4, 5, 6], 3)
    np.testing.assert_array_equal(m, [[1, 2, 3], [2, 4, 5], [3, 5, 6]])
    with pytest.raises(ValueError, match="has 6 entries, not 5"):
        ldpcov.unpack_upper_triangle([1, 2, 3, 4, 5], 3)


def test_urls():
    assert _target("http://127.0.0.1:50051") == ("127.0.0.1:50051", False)
    assert _target("https://agg.example:8443") == ("agg.example:8443", True)
    assert _target("https://agg.example") == ("agg.example:443", True)
    assert _target("localhost:1") == ("localhost:1", False)
    with pytest.raises(ValueError):
        _target("ftp://x:1")
    with pytest.raises(ValueError, match="no path"):
        _target("http://x:1/v1")


def test_an_estimate_built_from_a_message():
    message = pb.Estimate(
        collection_id="m",
        dim=2,
        upper_triangle=[4.0, 1.0, 1.0],
        correlation=[1.0, 0.5, 1.0],
        reports=10,
        moments=pb.MOMENTS_SECOND_MOMENT,
    )
    est = ldpcov.CovarianceEstimate(message, centre=[1.0, 2.0])
    np.testing.assert_array_equal(est.covariance_, [[4, 1], [1, 1]])
    np.testing.assert_array_equal(est.location_, [1.0, 2.0])
    assert est.assume_centered
    assert list(est.feature_names_in_) == ["x1", "x2"]
    assert not est.has_variable_names_
    assert est.raw_covariance_ is None and est.components_ is None and est.verdict_ is None
    with pytest.raises(ValueError, match="pca=K"):
        est.components_frame()
    with pytest.raises(ValueError, match="no error bars"):
        est.confidence_interval()
    np.testing.assert_allclose(est.get_precision() @ est.covariance_, np.eye(2), atol=1e-12)
    # Mahalanobis distance of the centre is 0, of centre + e0 the precision's (0, 0).
    d = est.mahalanobis([[1.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(d, [0.0, est.get_precision()[0, 0]])


def test_a_rule_must_be_known(monkeypatch):
    client = ldpcov.connect("http://127.0.0.1:1", token="t")
    with pytest.raises(ValueError, match="unknown rule"):
        client.estimate("x", rule="magic")
    with pytest.raises(ValueError, match="not a rule"):
        client.estimate("x", rule=pb.Edge())
    with pytest.raises(ValueError, match="pca_of"):
        client.estimate("x", pca_of="rows")
    with pytest.raises(ValueError, match="target"):
        client.estimate("x", target="inverse")
    with pytest.raises(ValueError, match="central mechanism"):
        ldpcov.central_release("gauss")
    client.close()


def test_the_errors_form_one_hierarchy():
    for cls in (
        ldpcov.NotFoundError,
        ldpcov.AuthenticationError,
        ldpcov.PermissionDeniedError,
        ldpcov.NotReleasableError,
        ldpcov.InvalidRequestError,
        ldpcov.UnavailableError,
        ldpcov.UnimplementedError,
        ldpcov.BudgetExhaustedError,
    ):
        assert issubclass(cls, ldpcov.RpcError)
        assert issubclass(cls, ldpcov.LdpcovError)
    assert issubclass(ldpcov.PlannerError, ldpcov.LdpcovError)
    assert issubclass(ldpcov.NotFoundError, LookupError)
    assert issubclass(ldpcov.InvalidRequestError, ValueError)


def test_an_undefined_correlation_stays_undefined_and_a_weak_verdict_warns():
    # Variable 1 has no variance above the noise: the daemon sends NaN in its row and
    # column and lists it; every frame keeps NaN (pandas' missing value).
    nan = float("nan")
    message = pb.Estimate(
        collection_id="m",
        dim=2,
        upper_triangle=[4.0, 0.0, 0.0],
        correlation=[1.0, nan, nan],
        undefined_correlation_variables=[1],
        reports=10,
        moments=pb.MOMENTS_SECOND_MOMENT,
        verdict=pb.SignalVerdict(
            state=pb.VERDICT_STATE_AT_THE_EDGE,
            sufficient=False,
            noise_to_signal_low=2.0,
            summary="at the edge: noise/signal at least 2.00",
        ),
    )
    with pytest.warns(ldpcov.InsufficientSignalWarning, match="at the edge: noise/signal"):
        est = ldpcov.CovarianceEstimate(message, centre=[0.0, 0.0])
    assert est.undefined_correlation_variables_ == [1]
    assert est.correlation_[0, 0] == 1.0
    assert np.isnan(est.correlation_[0, 1]) and np.isnan(est.correlation_[1, 1])
    frame = est.correlation_frame()
    assert frame.isna().to_numpy().tolist() == [[False, True], [True, True]]
    v = est.verdict_
    assert v.state == "at the edge" and not v.sufficient
    assert v.noise_to_signal is None and v.noise_to_signal_high is None
    assert v.noise_to_signal_low == 2.0 and v.reports_needed is None
