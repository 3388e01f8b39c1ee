"""The package against the real daemon (see conftest.py for who starts and fills it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import warnings

import grpc
import numpy as np
import pandas as pd
import pytest

import ldpcov
from ldpcov.v1 import ldpcov_pb2 as pb
from ldpcov.v1 import ldpcov_pb2_grpc as pb_grpc


def test_the_package_comes_from_the_installed_wheel():
    if os.environ.get("LDPCOV_TEST_EXPECT_INSTALLED") != "1":
        pytest.fail("LDPCOV_TEST_EXPECT_INSTALLED is not set (run through cargo test)")
    assert "site-packages" in ldpcov.__file__, ldpcov.__file__
    assert f"{os.sep}src{os.sep}ldpcov" not in ldpcov.__file__


def _raw_estimate(server: str, token: str, **fields) -> pb.Estimate:
    """The daemon's message itself, through the generated stub alone."""
    target = server.split("://", 1)[1]
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.AggregatorStub(channel)
        return stub.GetEstimate(
            pb.GetEstimateRequest(**fields),
            metadata=(("authorization", f"Bearer {token}"),),
        )


# -- collections -----------------------------------------------------------------------


def test_collections_lists_every_collection_in_id_order(client, fixture):
    statuses = client.collections()
    ids = [s.collection_id for s in statuses]
    assert ids == sorted(fixture), ids
    by_id = {s.collection_id: s for s in statuses}
    for cid, what in fixture.items():
        assert by_id[cid].reports == what["reports"], cid
    assert by_id["survey"].releasable and not by_id["empty"].releasable
    assert by_id["survey"].collection.variable_names == fixture["survey"]["names"]

    frame = client.collections_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == sorted(fixture)
    assert frame.index.name == "collection_id"
    assert frame.loc["survey", "reports"] == fixture["survey"]["reports"]
    assert frame.loc["curated", "privacy_model"] == "PRIVACY_MODEL_CENTRAL"
    assert frame.loc["moments", "moments"] == "MOMENTS_SECOND_MOMENT"


def test_status_and_parameters(client, fixture):
    status = client.status("survey")
    assert status.reports == fixture["survey"]["reports"]
    assert status.releasable and not status.closed
    c = client.collection("survey")
    assert c.dim == 5
    assert c.variable_names == fixture["survey"]["names"]
    assert c.epsilon == fixture["survey"]["epsilon"]
    assert c.clip_radius == fixture["survey"]["clip_radius"]
    assert c.moments == "MOMENTS_MEAN_AND_COVARIANCE"
    assert c.privacy_model == "PRIVACY_MODEL_LOCAL"
    assert c.local_mechanism == "LOCAL_MECHANISM_GAUSSIAN"
    assert c.params.diagonal_noise_sd > c.params.off_diagonal_noise_sd > 0


# -- the estimate as numpy ---------------------------------------------------------------


def test_the_estimate_is_the_daemons_matrix_unpacked(survey, server, admin_token, fixture):
    p = 5
    names = fixture["survey"]["names"]
    assert survey.n_features_in_ == p
    assert list(survey.feature_names_in_) == names and survey.has_variable_names_
    assert survey.n_reports_ == fixture["survey"]["reports"]
    assert survey.covariance_.shape == (p, p) and survey.covariance_.dtype == np.float64
    np.testing.assert_array_equal(survey.covariance_, survey.covariance_.T)
    # PSD-projected by default.
    assert np.linalg.eigvalsh(survey.covariance_).min() >= -1e-9
    # The same request through the bare stub: entry for entry the packed triangle.
    raw = _raw_estimate(server, admin_token, collection_id="survey", error_bars=True)
    rows, cols = np.triu_indices(p)
    packed = np.asarray(raw.upper_triangle)
    unpacked = np.zeros((p, p))
    unpacked[rows, cols] = packed
    unpacked[cols, rows] = packed
    # The default rule is cross-validation over random folds of fixed reports: the
    # same matrix on every call.
    np.testing.assert_allclose(survey.covariance_, unpacked, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        survey.raw_covariance_[rows, cols], np.asarray(raw.error_bars.raw_upper_triangle)
    )
    assert survey.proto_.collection_id == "survey"
    # The mean: shape, and the planted one within 5 noise sds.
    assert survey.location_.shape == (p,) and not survey.assume_centered
    sd = survey.location_noise_sd_
    assert sd > 0
    np.testing.assert_array_less(np.abs(survey.location_ - fixture["survey"]["mean"]), 5 * sd + 0.05)
    # Correlation: unit diagonal, within [-1, 1], the covariance's scaled.
    np.testing.assert_allclose(np.diag(survey.correlation_), 1.0)
    assert np.all(np.abs(survey.correlation_) <= 1 + 1e-12)
    d = np.sqrt(np.diag(survey.covariance_))
    np.testing.assert_allclose(survey.correlation_, survey.covariance_ / np.outer(d, d), atol=1e-9)
    assert survey.precision_ is None
    # The pseudo-inverse (the PSD projection may clamp an eigenvalue to 0, so the
    # inverse need not exist): Σ·P·Σ = Σ and P·Σ·P = P.
    prec = survey.get_precision()
    cov = survey.covariance_
    scale = max(1.0, float(np.abs(prec).max()) * float(np.abs(cov).max()))
    np.testing.assert_allclose(cov @ prec @ cov, cov, atol=1e-6 * scale * float(np.abs(cov).max()))
    np.testing.assert_allclose(prec @ cov @ prec, prec, atol=1e-6 * scale * float(np.abs(prec).max()))
    assert survey.rule_ and isinstance(survey.rule_, str)


def test_error_bars_cover_the_raw_average_and_the_truth(survey, fixture):
    p = 5
    lower, upper = survey.confidence_interval(0.95)
    assert lower.shape == upper.shape == (p, p)
    assert np.all(survey.standard_errors_ > 0)
    assert np.all(lower < survey.raw_covariance_) and np.all(survey.raw_covariance_ < upper)
    np.testing.assert_allclose(upper - lower, 2 * 1.959963984540054 * survey.standard_errors_)
    narrower = survey.confidence_interval(0.5)
    assert np.all(narrower[1] - narrower[0] < upper - lower)
    # The planted covariance: 95 % intervals, 15 distinct entries; ≥ 12 covered is
    # a loose bound (binomial: P(fewer) < 0.5 % if each covers with 0.95).
    truth = np.asarray(fixture["survey"]["covariance"])
    rows, cols = np.triu_indices(p)
    covered = (lower[rows, cols] <= truth[rows, cols]) & (truth[rows, cols] <= upper[rows, cols])
    assert covered.sum() >= 12, (covered, survey.raw_covariance_, truth)
    assert survey.error_bars_method_ in ("empirical", "closed-form")
    # Correlations: intervals inside [-1, 1], z off the diagonal, NaN on it.
    clo, chi = survey.confidence_interval(of="correlation")
    assert np.all(clo >= -1) and np.all(chi <= 1)
    assert np.all(np.isnan(np.diag(survey.correlation_z_)))
    off = ~np.eye(p, dtype=bool)
    np.testing.assert_allclose(
        survey.correlation_z_[off],
        survey.raw_correlation_[off] / survey.correlation_standard_errors_[off],
    )
    # height–weight (0.77 planted correlation) stands out of the noise (z about 7).
    assert survey.correlation_z_[0, 1] > 4
    with pytest.raises(ValueError):
        survey.confidence_interval(1.5)


def test_pca_recovers_the_planted_factor(survey, fixture):
    k, p = 3, 5
    assert survey.n_components_ == k
    assert survey.components_.shape == (k, p)
    # Orthonormal rows, each an eigenvector of the released matrix with its eigenvalue.
    np.testing.assert_allclose(survey.components_ @ survey.components_.T, np.eye(k), atol=1e-9)
    for v, lam in zip(survey.components_, survey.explained_variance_, strict=True):
        np.testing.assert_allclose(survey.covariance_ @ v, lam * v, atol=1e-8)
        assert v[np.argmax(np.abs(v))] > 0  # the largest loading positive
    top = np.sort(np.linalg.eigvalsh(survey.covariance_))[::-1][:k]
    np.testing.assert_allclose(survey.explained_variance_, top, atol=1e-9)
    ratios = survey.explained_variance_ratio_
    assert np.all((ratios >= 0) & (ratios <= 1)) and np.all(np.diff(ratios) <= 1e-12)
    np.testing.assert_allclose(ratios, survey.explained_variance_ / survey.total_variance_)
    assert survey.components_of_correlation_ is False
    # The planted factor: |cos| with ℓ/‖ℓ‖ (its population leading eigenvector is
    # within 0.99 of ℓ's direction).
    ell = np.asarray(fixture["survey"]["loadings"])
    cos = abs(survey.components_[0] @ ell) / np.linalg.norm(ell)
    assert cos > 0.9, cos
    assert survey.above_noise_edge_.dtype == bool and survey.above_noise_edge_[0]
    assert survey.noise_edge_ > 0


def test_pca_of_the_correlation(client):
    est = client.estimate("survey", pca=5, pca_of="correlation")
    assert est.components_of_correlation_ is True
    np.testing.assert_allclose(
        np.sort(est.explained_variance_)[::-1],
        np.sort(np.linalg.eigvalsh(est.correlation_))[::-1],
        atol=1e-9,
    )
    np.testing.assert_allclose(est.total_variance_, np.trace(est.correlation_), rtol=1e-9)
    np.testing.assert_allclose(est.explained_variance_ratio_.sum(), 1.0, atol=1e-9)


def test_the_verdict(survey):
    v = survey.verdict_
    assert isinstance(v, ldpcov.Verdict)
    assert v.sufficient, v
    assert v.summary and str(v) == v.summary
    assert v.state == "sufficient"
    assert 0 < v.noise_to_signal < 1
    assert v.noise_to_signal_low <= v.noise_to_signal
    assert v.noise_to_signal_high is None or v.noise_to_signal <= v.noise_to_signal_high
    assert v.off_diagonal_signal_z > 3
    assert v.reports_needed >= 1 and v.target_noise_to_signal > 0
    assert not v.release_is_zero


# -- the estimate as pandas --------------------------------------------------------------


def test_frames_are_labelled_with_the_variables_names(survey, fixture):
    names = fixture["survey"]["names"]
    cov = survey.covariance_frame()
    assert list(cov.index) == names and list(cov.columns) == names
    assert cov.loc["height", "weight"] == survey.covariance_[0, 1]
    assert cov.loc["score", "age"] == survey.covariance_[4, 2]
    corr = survey.correlation_frame()
    assert list(corr.columns) == names and corr.loc["age", "age"] == pytest.approx(1.0)
    se = survey.standard_errors_frame()
    assert se.loc["income", "height"] == survey.standard_errors_[3, 0]
    mean = survey.location_series()
    assert list(mean.index) == names and mean.name == "mean"
    assert mean["weight"] == survey.location_[1]

    pcs = survey.components_frame()
    assert list(pcs.index) == ["PC1", "PC2", "PC3"]
    assert list(pcs.columns) == ["eigenvalue", "explained_variance_ratio", "above_noise_edge", *names]
    np.testing.assert_array_equal(pcs[names].to_numpy(), survey.components_)
    assert bool(pcs.loc["PC1", "above_noise_edge"])

    tidy = survey.to_frame()
    assert len(tidy) == 15
    assert tidy.index.names == ["variable_1", "variable_2"]
    row = tidy.loc[("height", "weight")]
    assert row["covariance"] == survey.covariance_[0, 1]
    assert row["lower"] < row["raw_covariance"] < row["upper"]
    assert row["correlation_z"] == survey.correlation_z_[0, 1]
    assert np.isnan(tidy.loc[("age", "age"), "correlation_z"])

    # Mahalanobis distances of a DataFrame: columns matched by name, in any order.
    frame = pd.DataFrame([survey.location_, survey.location_ + 1], columns=names)
    d = survey.mahalanobis(frame[names[::-1]])
    assert d[0] == pytest.approx(0.0, abs=1e-12) and d[1] > 0


# -- rules and targets -------------------------------------------------------------------


def test_rules_by_name_and_by_message(client):
    raw = client.estimate("survey", rule="none", psd=False, error_bars=False)
    assert raw.raw_covariance_ is None
    assert raw.rule_
    factor = client.estimate("survey", rule=pb.FactorModel(rank=1))
    assert "factor" in factor.rule_.lower(), factor.rule_
    universal = client.estimate("survey", rule="universal")
    assert universal.threshold_ > 0


def test_a_precision_target(client, fixture):
    est = client.estimate("survey", target="precision-ridge", precision_lambda=0.1)
    assert est.precision_ is not None and est.precision_.shape == (5, 5)
    np.testing.assert_allclose(est.precision_, est.precision_.T)
    assert np.all(np.diag(est.precision_) > 0)
    assert est.get_precision() is est.precision_
    frame = est.precision_frame()
    assert list(frame.columns) == fixture["survey"]["names"]


def test_a_second_moment_collection(client, fixture):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = client.estimate("moments")
    p = fixture["moments"]["dim"]
    assert est.moments == "MOMENTS_SECOND_MOMENT"
    assert est.assume_centered
    np.testing.assert_array_equal(est.location_, np.zeros(p))
    assert list(est.feature_names_in_) == [f"x{i}" for i in range(1, p + 1)]
    assert not est.has_variable_names_
    assert est.location_series().name == "centre"
    assert est.covariance_frame().shape == (p, p)
    v = est.verdict_
    assert v is not None and v.summary.startswith(v.state)
    # A verdict other than "sufficient" is warned, with its summary, at the caller.
    insufficient = [w for w in caught if issubclass(w.category, ldpcov.InsufficientSignalWarning)]
    assert [str(w.message) for w in insufficient] == ([] if v.sufficient else [v.summary])
    if insufficient:
        assert insufficient[0].filename == __file__
    if not v.sufficient:
        # The fewest reports that may do are more than the reports at hand, or no
        # signal is measurable at all (None).
        assert v.reports_needed_low is None or v.reports_needed_low > est.n_reports_, v


def test_a_central_collection(client, fixture):
    with pytest.raises(ldpcov.InvalidRequestError) as refused:
        client.estimate("curated")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    before = client.status("curated")
    # The budget: ρ = (√(ln(1/δ) + ε) − √ln(1/δ))² = 0.068 at ε = 2, δ = 10⁻⁶.
    assert before.rho_budget == pytest.approx(0.0676, abs=1e-3) and before.rho_spent == 0
    with pytest.raises(ldpcov.BudgetExhaustedError) as e:
        client.estimate("curated", release=ldpcov.central_release("gauss-cov", rho=0.5))
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    release = ldpcov.central_release("gauss-cov", rho=0.03)
    est = client.estimate("curated", release=release, pca=2)
    assert list(est.feature_names_in_) == fixture["curated"]["names"]
    assert est.covariance_.shape == (4, 4) and est.components_.shape == (2, 4)
    after = client.status("curated")
    assert after.rho_spent == pytest.approx(0.03)
    # The same release again comes from the ledger, at no cost and with the same matrix.
    again = client.estimate("curated", release=release)
    np.testing.assert_array_equal(again.covariance_, est.covariance_)
    assert client.status("curated").rho_spent == pytest.approx(0.03)
    with pytest.raises(ldpcov.PlannerError, match="central"):
        client.plan("curated", users=100)


# -- the planner -------------------------------------------------------------------------


def test_the_planner_agrees_with_the_cli(client, fixture, aggregator_bin):
    s = fixture["survey"]
    plan = client.plan("survey", users=s["reports"], target_error=0.5)
    assert isinstance(plan, ldpcov.Plan)
    out = subprocess.run(
        [
            aggregator_bin, "plan", "--dim", "5", "--epsilon", str(s["epsilon"]),
            "--delta", str(s["delta"]), "--clip-radius", str(s["clip_radius"]),
            "--moments", "mean-and-covariance", "--mechanism", "gaussian",
            "--users", str(s["reports"]), "--target-error", "0.5",
        ],
        check=True, capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("LDPCOV_")},
    )  # fmt: skip
    cli = json.loads(out.stdout)["mechanisms"][0]
    assert plan.mechanism == cli["mechanism"]
    assert plan.raw_average_error == pytest.approx(cli["raw_average_frobenius_error"], rel=1e-9)
    assert plan.users_for_target_error == cli["users_for_target_error"]
    # The error falls as 1/√n.
    quarter = client.plan("survey", users=4 * s["reports"])
    assert quarter.raw_average_error == pytest.approx(plan.raw_average_error / 2)
    with pytest.raises(ldpcov.PlannerError):
        client.plan("survey", target_error=0)


# -- errors ------------------------------------------------------------------------------


def test_an_unknown_collection_raises_not_found(client):
    for call in (client.estimate, client.status, client.collection):
        with pytest.raises(ldpcov.NotFoundError) as e:
            call("no-such-collection")
        assert isinstance(e.value, ldpcov.LdpcovError) and isinstance(e.value, LookupError)
        assert e.value.code == grpc.StatusCode.NOT_FOUND
        assert "no-such-collection" in e.value.details or "no-such-collection" in str(e.value)


def test_an_estimate_needs_the_admin_token(server, monkeypatch):
    monkeypatch.delenv("LDPCOV_TOKEN", raising=False)
    with ldpcov.connect(server) as anonymous:
        # Reading a status is open when the daemon has only an admin token...
        assert anonymous.status("survey").reports > 0
        # ...releasing an estimate is not.
        with pytest.raises(ldpcov.AuthenticationError) as e:
            anonymous.estimate("survey")
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.method == "GetEstimate"
    with ldpcov.connect(server, token="not-the-token") as wrong:
        with pytest.raises(ldpcov.AuthenticationError):
            wrong.estimate("survey")
    monkeypatch.setenv("LDPCOV_TOKEN", os.environ["LDPCOV_TEST_ADMIN_TOKEN"])
    with ldpcov.connect(server) as from_env:
        assert from_env.estimate("survey", error_bars=False).n_reports_ > 0


def test_too_few_reports_raise_not_releasable(client):
    with pytest.raises(ldpcov.NotReleasableError) as e:
        client.estimate("empty")
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_an_unreachable_daemon_raises_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ldpcov.connect(f"http://127.0.0.1:{port}", token="t", timeout=5) as nobody:
        with pytest.raises(ldpcov.UnavailableError) as e:
            nobody.status("survey")
    assert isinstance(e.value, ConnectionError)
