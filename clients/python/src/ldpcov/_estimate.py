"""An estimate released by the aggregator, as numpy arrays and pandas DataFrames."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .v1 import ldpcov_pb2 as pb

__all__ = [
    "CovarianceEstimate",
    "InsufficientSignalWarning",
    "Verdict",
    "unpack_upper_triangle",
]


def unpack_upper_triangle(packed: Sequence[float], p: int) -> np.ndarray:
    """The symmetric ``p × p`` matrix of a packed upper triangle (row-major, i ≤ j), the
    layout of every matrix on the wire.

    >>> unpack_upper_triangle([1.0, 2.0, 3.0], 2)
    array([[1., 2.],
           [2., 3.]])
    """
    values = np.asarray(packed, dtype=np.float64)
    expected = p * (p + 1) // 2
    if values.shape != (expected,):
        raise ValueError(
            f"a packed upper triangle of a {p} × {p} matrix has {expected} entries, not {values.size}"
        )
    matrix = np.zeros((p, p), dtype=np.float64)
    rows, cols = np.triu_indices(p)
    matrix[rows, cols] = values
    matrix[cols, rows] = values
    return matrix


@dataclass(frozen=True)
class Verdict:
    """Whether the reports carry enough signal for the estimate to say more than a
    trivial (zero or diagonal) one: the daemon's ``SignalVerdict``.

    Attributes
    ----------
    state : str
        ``"sufficient"``, ``"at the edge"`` (the reports cannot tell which side of the
        limit, a noise 10 times the signal, the data are) or ``"insufficient"``
        (always for a release of the zero matrix).
    sufficient : bool
        ``state == "sufficient"``.
    noise_to_signal : float or None
        ‖noise‖_F / ‖signal‖_F of the raw average at the signal's point estimate;
        None when no signal is measurable. Above 1 the raw average is expected to be
        farther from the truth than the zero matrix.
    noise_to_signal_low, noise_to_signal_high : float or None
        The ratio's interval (the signal's ± 3 sds); ``high`` None: unbounded.
    off_diagonal_signal_z, top_eigenvalue_z : float
        z of the tests for off-diagonal signal; above about 3 the data show correlations
        the noise cannot explain.
    reports_needed : int or None
        The reports the planner's law says bring ``noise_to_signal`` down to
        ``target_noise_to_signal`` (the noise falls as 1/√n); None with
        ``noise_to_signal``.
    reports_needed_low, reports_needed_high : int or None
        The same at the ends of the ratio's interval (``high`` None: unbounded).
    target_noise_to_signal : float
    release_is_zero : bool
        The released matrix is the zero matrix.
    summary : str
        One line for people, starting with the state.
    """

    state: str
    sufficient: bool
    noise_to_signal: Optional[float]
    noise_to_signal_low: Optional[float]
    noise_to_signal_high: Optional[float]
    off_diagonal_signal_z: float
    top_eigenvalue_z: float
    reports_needed: Optional[int]
    reports_needed_low: Optional[int]
    reports_needed_high: Optional[int]
    target_noise_to_signal: float
    release_is_zero: bool
    summary: str

    _STATES = {
        pb.VERDICT_STATE_SUFFICIENT: "sufficient",
        pb.VERDICT_STATE_AT_THE_EDGE: "at the edge",
        pb.VERDICT_STATE_INSUFFICIENT: "insufficient",
    }

    @classmethod
    def from_proto(cls, message: pb.SignalVerdict) -> "Verdict":
        def optional(name: str):
            return getattr(message, name) if message.HasField(name) else None

        def optional_int(name: str) -> Optional[int]:
            value = optional(name)
            return None if value is None else int(value)

        return cls(
            state=cls._STATES.get(message.state, "unknown"),
            sufficient=message.sufficient,
            noise_to_signal=optional("noise_to_signal"),
            noise_to_signal_low=optional("noise_to_signal_low"),
            noise_to_signal_high=optional("noise_to_signal_high"),
            off_diagonal_signal_z=message.off_diagonal_signal_z,
            top_eigenvalue_z=message.top_eigenvalue_z,
            reports_needed=optional_int("reports_needed"),
            reports_needed_low=optional_int("reports_needed_low"),
            reports_needed_high=optional_int("reports_needed_high"),
            target_noise_to_signal=message.target_noise_to_signal,
            release_is_zero=message.release_is_zero,
            summary=message.summary,
        )

    def __str__(self) -> str:
        return self.summary


class InsufficientSignalWarning(UserWarning):
    """Warned by :meth:`ldpcov.Client.estimate` when the verdict is not
    ``"sufficient"``: the release is not to be read as a covariance estimate (or is at
    the edge of being one)."""


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), not {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


class CovarianceEstimate:
    """A covariance estimate from an ldpcov aggregator, with scikit-learn's covariance
    estimators' attribute names (fitted attributes end in ``_``).

    Built by :meth:`ldpcov.Client.estimate`; the daemon did all the estimation (this
    object only unpacks what it released, plus the normal-approximation intervals of
    :meth:`confidence_interval`).

    Attributes
    ----------
    covariance_ : ndarray of shape (n_features, n_features)
        The released, regularised matrix: the covariance for a mean-and-covariance
        collection; for a second-moment collection the second moment about the
        collection's centre, E[(x − c)(x − c)ᵀ] (scikit-learn's ``assume_centered=True``
        with the centre as ``location_``), which is the covariance only for data whose
        mean is the centre.
    location_ : ndarray of shape (n_features,)
        The estimated mean (mean-and-covariance collections), or the public centre
        (zeros without one) the second moment is taken about (``assume_centered``).
    assume_centered : bool
        True for a second-moment collection (``location_`` was not estimated).
    location_noise_sd_ : float
        Noise sd of each coordinate of an estimated ``location_``, data units (0 when none).
    precision_ : ndarray of shape (n_features, n_features) or None
        The precision matrix the daemon released for the ``precision-ridge`` and
        ``precision-glasso`` targets; None for the covariance target (then
        :meth:`get_precision` returns the pseudo-inverse of ``covariance_``).
    correlation_ : ndarray of shape (n_features, n_features)
        The correlation of ``covariance_`` where it means something: NaN in the row and
        column (diagonal included) of a variable whose released variance is not clearly
        above zero (3 noise sds; listed in ``undefined_correlation_variables_``).
    undefined_correlation_variables_ : list of int
        The variables (0-based) whose correlations are NaN.
    raw_covariance_ : ndarray of shape (n_features, n_features) or None
        The unregularised average the estimators start from, and ``standard_errors_`` the
        standard error of each of its entries (privacy noise plus sampling of users, not
        clipping bias). These are error bars of the raw average, NOT of the regularised
        ``covariance_``, whose thresholds and shrinkage trade variance for bias.
    standard_errors_ : ndarray of shape (n_features, n_features) or None
    raw_correlation_, correlation_standard_errors_ : ndarray or None
        The raw matrix's correlation and its standard errors (NaN for a variable whose
        raw variance is not above 3 of its standard errors; delta method, 0 on the
        diagonal).
    correlation_z_ : ndarray or None
        ``raw_correlation_ / correlation_standard_errors_`` off the diagonal (NaN on it):
        how many standard errors each correlation stands from zero.
    error_bars_method_ : str
        ``"empirical"`` or ``"closed-form"`` (see the proto's ``ErrorBars``).
    components_ : ndarray of shape (n_components, n_features) or None
        Principal axes (unit eigenvectors, rows, largest eigenvalue first, each one's
        largest loading positive), as scikit-learn's PCA; None unless ``pca`` was asked.
    explained_variance_ : ndarray of shape (n_components,) or None
        Their eigenvalues; ``explained_variance_ratio_`` the eigenvalue over the trace.
    explained_variance_ratio_ : ndarray or None
    above_noise_edge_ : ndarray of bool or None
        Whether the raw matrix's eigenvalue of the same rank stands above the edge of
        the noise spectrum: a component below it is not distinguishable from noise.
    noise_edge_ : float or None
    total_variance_ : float or None
    components_of_correlation_ : bool or None
        Whether the components are of ``correlation_`` rather than ``covariance_``.
    n_components_ : int
    verdict_ : Verdict or None
        Whether there are enough reports (see :class:`Verdict`).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The collection's variable names, or ``x1`` … ``xp`` (1-based, the names the
        CLI's outputs use) when it has none (``has_variable_names_`` is then False).
    has_variable_names_ : bool
    n_reports_ : int
        Reports averaged.
    rule_ : str
        The rule the daemon applied (``threshold_rule``), ``threshold_`` its threshold.
    threshold_ : float
    entry_noise_sd_ : float
        Noise sd of one averaged off-diagonal entry, data units.
    psd_projected_ : bool
    clamped_eigenvalues_ : int
    graph_ : ndarray of shape (n_edges, 2) or None
        The graphical lasso's edges (i < j), for the ``precision-glasso`` target.
    collection_id : str
    moments : str
        ``"MOMENTS_MEAN_AND_COVARIANCE"`` or ``"MOMENTS_SECOND_MOMENT"``.
    proto_ : ldpcov.v1.ldpcov_pb2.Estimate
        The message itself, for anything not unpacked here (central releases' budget,
        shuffled collections' guarantee).
    """

    def __init__(self, message: pb.Estimate, centre: Optional[Sequence[float]] = None) -> None:
        p = int(message.dim)
        self.proto_ = message
        self.collection_id: str = message.collection_id
        self.n_features_in_: int = p
        names = list(message.variable_names)
        self.has_variable_names_: bool = bool(names)
        if not names:
            names = [f"x{i}" for i in range(1, p + 1)]
        self.feature_names_in_: np.ndarray = np.asarray(names, dtype=object)
        self.n_reports_: int = int(message.reports)
        self.moments: str = pb.Moments.Name(message.moments)

        self.covariance_: np.ndarray = unpack_upper_triangle(message.upper_triangle, p)
        self.correlation_: np.ndarray = (
            unpack_upper_triangle(message.correlation, p)
            if len(message.correlation)
            else _correlation(self.covariance_)
        )
        self.undefined_correlation_variables_: list = [
            int(i) for i in message.undefined_correlation_variables
        ]
        if message.moments == pb.MOMENTS_MEAN_AND_COVARIANCE:
            self.assume_centered: bool = False
            self.location_: np.ndarray = np.asarray(message.mean, dtype=np.float64)
        else:
            self.assume_centered = True
            c = np.asarray(centre if centre is not None and len(centre) else np.zeros(p))
            self.location_ = c.astype(np.float64)
        self.location_noise_sd_: float = message.mean_noise_sd

        self.precision_: Optional[np.ndarray] = (
            unpack_upper_triangle(message.precision_upper_triangle, p)
            if len(message.precision_upper_triangle)
            else None
        )
        self.graph_: Optional[np.ndarray] = (
            np.array([[e.i, e.j] for e in message.graph], dtype=np.int64).reshape(-1, 2)
            if message.target == pb.ESTIMATE_TARGET_PRECISION_GLASSO
            else None
        )

        self.raw_covariance_: Optional[np.ndarray] = None
        self.standard_errors_: Optional[np.ndarray] = None
        self.raw_correlation_: Optional[np.ndarray] = None
        self.correlation_standard_errors_: Optional[np.ndarray] = None
        self.correlation_z_: Optional[np.ndarray] = None
        self.error_bars_method_: Optional[str] = None
        if message.HasField("error_bars") and len(message.error_bars.raw_upper_triangle):
            bars = message.error_bars
            self.raw_covariance_ = unpack_upper_triangle(bars.raw_upper_triangle, p)
            self.standard_errors_ = unpack_upper_triangle(bars.standard_errors, p)
            self.raw_correlation_ = unpack_upper_triangle(bars.raw_correlation, p)
            self.correlation_standard_errors_ = unpack_upper_triangle(
                bars.correlation_standard_errors, p
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                z = self.raw_correlation_ / self.correlation_standard_errors_
            z[self.correlation_standard_errors_ <= 0] = np.nan
            np.fill_diagonal(z, np.nan)
            self.correlation_z_ = z
            self.error_bars_method_ = bars.method

        self.verdict_: Optional[Verdict] = (
            Verdict.from_proto(message.verdict) if message.HasField("verdict") else None
        )
        if self.verdict_ is not None and not self.verdict_.sufficient:
            # Through Client.estimate: the warning points at the caller's line.
            warnings.warn(self.verdict_.summary, InsufficientSignalWarning, stacklevel=3)

        self.components_: Optional[np.ndarray] = None
        self.explained_variance_: Optional[np.ndarray] = None
        self.explained_variance_ratio_: Optional[np.ndarray] = None
        self.above_noise_edge_: Optional[np.ndarray] = None
        self.noise_edge_: Optional[float] = None
        self.total_variance_: Optional[float] = None
        self.components_of_correlation_: Optional[bool] = None
        self.n_components_: int = 0
        if message.HasField("principal_components") and len(
            message.principal_components.components
        ):
            pcs = message.principal_components
            k = len(pcs.components)
            self.n_components_ = k
            self.components_ = np.array(
                [list(c.loadings) for c in pcs.components], dtype=np.float64
            ).reshape(k, p)
            self.explained_variance_ = np.array([c.eigenvalue for c in pcs.components])
            self.explained_variance_ratio_ = np.array(
                [c.explained_variance_ratio for c in pcs.components]
            )
            self.above_noise_edge_ = np.array(
                [c.above_noise_edge for c in pcs.components], dtype=bool
            )
            self.noise_edge_ = pcs.noise_edge
            self.total_variance_ = pcs.total_variance
            self.components_of_correlation_ = pcs.of_correlation

        self.rule_: str = message.threshold_rule
        self.threshold_: float = message.threshold
        self.entry_noise_sd_: float = message.entry_noise_sd
        self.psd_projected_: bool = message.psd_projected
        self.clamped_eigenvalues_: int = int(message.clamped_eigenvalues)

    # -- numpy ------------------------------------------------------------------------

    def get_precision(self) -> np.ndarray:
        """The precision matrix: ``precision_`` when the daemon released one, else the
        pseudo-inverse of ``covariance_`` (as scikit-learn's ``get_precision``)."""
        if self.precision_ is not None:
            return self.precision_
        return np.linalg.pinv(self.covariance_, hermitian=True)

    def confidence_interval(
        self, level: float = 0.95, *, of: str = "covariance"
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Per-entry normal-approximation intervals ``raw ± z·se`` of the RAW average.

        Parameters
        ----------
        level : float
            Coverage of each entry's interval (0.95: ``z = 1.96``).
        of : {"covariance", "correlation"}
            Intervals of ``raw_covariance_`` (covering the users' population matrix with
            probability about ``level`` per entry), or of ``raw_correlation_`` (clipped to
            [-1, 1]; the diagonal is exactly 1 where the variance is positive).

        Returns
        -------
        lower, upper : ndarray of shape (n_features, n_features)

        They cover the privacy noise and the sampling of users, not clipping bias, and
        are not intervals of the regularised ``covariance_``.
        """
        if self.raw_covariance_ is None:
            raise ValueError("this estimate carries no error bars (a daemon before them?)")
        z = _z(level)
        if of == "covariance":
            raw, se = self.raw_covariance_, self.standard_errors_
            return raw - z * se, raw + z * se
        if of == "correlation":
            raw, se = self.raw_correlation_, self.correlation_standard_errors_
            return np.clip(raw - z * se, -1.0, 1.0), np.clip(raw + z * se, -1.0, 1.0)
        raise ValueError(f"of must be 'covariance' or 'correlation', not {of!r}")

    def mahalanobis(self, X) -> np.ndarray:
        """Squared Mahalanobis distances of the rows of ``X`` (array or DataFrame with the
        variables as columns, reordered by name) under ``location_`` and
        :meth:`get_precision`, as scikit-learn's ``mahalanobis``."""
        if isinstance(X, pd.DataFrame):
            X = X.loc[:, list(self.feature_names_in_)].to_numpy(dtype=np.float64)
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        centred = X - self.location_
        return np.einsum("ij,jk,ik->i", centred, self.get_precision(), centred)

    # -- pandas -----------------------------------------------------------------------

    def _matrix_frame(self, matrix: Optional[np.ndarray], what: str) -> pd.DataFrame:
        if matrix is None:
            raise ValueError(f"this estimate carries no {what}")
        names = pd.Index(self.feature_names_in_, name="variable")
        return pd.DataFrame(matrix, index=names, columns=names.copy())

    def covariance_frame(self) -> pd.DataFrame:
        """``covariance_`` labelled by variable name (index and columns)."""
        return self._matrix_frame(self.covariance_, "covariance")

    def correlation_frame(self) -> pd.DataFrame:
        """``correlation_`` labelled by variable name."""
        return self._matrix_frame(self.correlation_, "correlation")

    def precision_frame(self) -> pd.DataFrame:
        """:meth:`get_precision` labelled by variable name."""
        return self._matrix_frame(self.get_precision(), "precision")

    def standard_errors_frame(self) -> pd.DataFrame:
        """``standard_errors_`` (of the raw average) labelled by variable name."""
        return self._matrix_frame(self.standard_errors_, "error bars")

    def location_series(self) -> pd.Series:
        """``location_`` as a Series indexed by variable name."""
        return pd.Series(
            self.location_,
            index=pd.Index(self.feature_names_in_, name="variable"),
            name="mean" if not self.assume_centered else "centre",
        )

    def components_frame(self) -> pd.DataFrame:
        """The principal components: one row per component (``PC1``, …) with the
        eigenvalue, the explained-variance ratio, whether it stands above the noise edge,
        and one loading column per variable."""
        if self.components_ is None:
            raise ValueError(
                "this estimate has no principal components: ask for them with "
                "client.estimate(..., pca=K)"
            )
        index = pd.Index([f"PC{k + 1}" for k in range(self.n_components_)], name="component")
        loadings = pd.DataFrame(self.components_, index=index, columns=list(self.feature_names_in_))
        summary = pd.DataFrame(
            {
                "eigenvalue": self.explained_variance_,
                "explained_variance_ratio": self.explained_variance_ratio_,
                "above_noise_edge": self.above_noise_edge_,
            },
            index=index,
        )
        return pd.concat([summary, loadings], axis=1)

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """One row per pair of variables (i ≤ j, row-major), tidy: the released
        covariance and correlation and, when the estimate carries error bars, the raw
        average, its standard error and ``level`` interval, the raw correlation, its
        standard error and z.

        The index is a MultiIndex ``(variable_1, variable_2)``.
        """
        rows, cols = np.triu_indices(self.n_features_in_)
        names = self.feature_names_in_
        index = pd.MultiIndex.from_arrays(
            [names[rows], names[cols]], names=["variable_1", "variable_2"]
        )
        data = {
            "covariance": self.covariance_[rows, cols],
            "correlation": self.correlation_[rows, cols],
        }
        if self.raw_covariance_ is not None:
            lower, upper = self.confidence_interval(level)
            data.update(
                {
                    "raw_covariance": self.raw_covariance_[rows, cols],
                    "standard_error": self.standard_errors_[rows, cols],
                    "lower": lower[rows, cols],
                    "upper": upper[rows, cols],
                    "raw_correlation": self.raw_correlation_[rows, cols],
                    "correlation_standard_error": self.correlation_standard_errors_[rows, cols],
                    "correlation_z": self.correlation_z_[rows, cols],
                }
            )
        return pd.DataFrame(data, index=index)

    def __repr__(self) -> str:
        verdict = ""
        if self.verdict_ is not None:
            verdict = (
                ", sufficient"
                if self.verdict_.sufficient
                else f", {self.verdict_.state.upper()}: see verdict_"
            )
        return (
            f"CovarianceEstimate(collection_id={self.collection_id!r}, "
            f"n_features_in_={self.n_features_in_}, n_reports_={self.n_reports_}, "
            f"rule_={self.rule_!r}{verdict})"
        )


def _correlation(matrix: np.ndarray) -> np.ndarray:
    d = np.diag(matrix)
    scale = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    return matrix * scale[:, None] * scale[None, :]
