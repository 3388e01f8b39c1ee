"""The connection to an ``ldpcov-aggregator`` daemon (gRPC service ``ldpcov.v1.Aggregator``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple, Union
from urllib.parse import urlparse

import grpc
import pandas as pd
from google.protobuf.message import Message

from . import planner
from ._errors import from_grpc
from ._estimate import CovarianceEstimate
from .v1 import ldpcov_pb2 as pb
from .v1 import ldpcov_pb2_grpc as pb_grpc

__all__ = ["Client", "Collection", "CollectionStatus", "connect", "central_release"]

# Estimates of large dimensions exceed gRPC's default 4 MiB: p = 1000 sends six packed
# triangles of 500 500 doubles.
_MAX_MESSAGE = 1 << 30

# The short names of the rules (GetEstimateRequest's `threshold` oneof), as the CLI's
# `estimate --threshold` spells them.
_RULES = {
    "none": "none",
    "universal": "universal",
    "ldp-noise": "ldp_noise",
    "adaptive": "adaptive",
    "cross-validated": "cross_validated",
    "cv": "cross_validated",
    "spectral": "spectral",
    "factor": "factor",
    "bulk-shrink": "bulk_shrink",
}

_TARGETS = {
    "covariance": pb.ESTIMATE_TARGET_COVARIANCE,
    "precision-ridge": pb.ESTIMATE_TARGET_PRECISION_RIDGE,
    "precision-glasso": pb.ESTIMATE_TARGET_PRECISION_GLASSO,
}

_CENTRAL_MECHANISMS = {
    "gauss-cov": pb.CENTRAL_MECHANISM_GAUSS_COV,
    "separate-cov": pb.CENTRAL_MECHANISM_SEPARATE_COV,
    "laplace-cov": pb.CENTRAL_MECHANISM_LAPLACE_COV,
    "adaptive-cov": pb.CENTRAL_MECHANISM_ADAPTIVE_COV,
    "compressed-not-dp": pb.CENTRAL_MECHANISM_COMPRESSED_NOT_DP,
    "gauss-cov-folds": pb.CENTRAL_MECHANISM_GAUSS_COV_FOLDS,
    "separate-cov-laplace": pb.CENTRAL_MECHANISM_SEPARATE_COV_LAPLACE,
    "adaptive-cov-laplace": pb.CENTRAL_MECHANISM_ADAPTIVE_COV_LAPLACE,
}


def central_release(
    mechanism: str = "gauss-cov",
    *,
    rho: float = 0.0,
    epsilon: float = 0.0,
    compressed_rows: int = 0,
) -> pb.CentralRelease:
    """The release a central collection's estimate post-processes (and spends budget on).

    ``mechanism`` is one of ``gauss-cov``, ``separate-cov``, ``laplace-cov``,
    ``adaptive-cov``, ``compressed-not-dp``, ``gauss-cov-folds``,
    ``separate-cov-laplace``, ``adaptive-cov-laplace``; ``rho`` (zCDP) or ``epsilon``
    (the Laplace mechanisms) is what the release spends. Asking for the same release
    again is answered from the daemon's ledger at no cost.
    """
    try:
        value = _CENTRAL_MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(
            f"unknown central mechanism {mechanism!r}: one of {', '.join(_CENTRAL_MECHANISMS)}"
        ) from None
    return pb.CentralRelease(
        mechanism=value, rho=rho, epsilon=epsilon, compressed_rows=compressed_rows
    )


@dataclass(frozen=True)
class Collection:
    """A collection's public parameters (``GetCollection``).

    Attributes
    ----------
    collection_id : str
    dim : int
    variable_names : list of str
        Empty when the collection has none.
    epsilon, delta : float
        Of one report (local), or of all releases together (central).
    clip_radius : float
    min_reports : int
    moments : str
        ``MOMENTS_MEAN_AND_COVARIANCE`` or ``MOMENTS_SECOND_MOMENT``.
    privacy_model : str
        ``PRIVACY_MODEL_LOCAL`` or ``PRIVACY_MODEL_CENTRAL``.
    local_mechanism : str
        ``LOCAL_MECHANISM_GAUSSIAN``, ``…_GAUSSIAN_TRIU``, ``…_RANK_ONE`` (unspecified
        for a central collection).
    centre : list of float
        The public centre (empty for none).
    shuffled : bool
    params : ldpcov.v1.ldpcov_pb2.CollectionParams
        The message, with the derived fields (noise sds, grid, …).
    """

    collection_id: str
    dim: int
    variable_names: List[str]
    epsilon: float
    delta: float
    clip_radius: float
    min_reports: int
    moments: str
    privacy_model: str
    local_mechanism: str
    centre: List[float]
    shuffled: bool
    params: pb.CollectionParams = field(repr=False)

    @classmethod
    def from_proto(cls, params: pb.CollectionParams) -> "Collection":
        spec = params.spec
        return cls(
            collection_id=spec.collection_id,
            dim=int(spec.dim),
            variable_names=list(spec.variable_names),
            epsilon=spec.epsilon,
            delta=spec.delta,
            clip_radius=spec.clip_radius,
            min_reports=int(spec.min_reports),
            moments=pb.Moments.Name(spec.moments),
            privacy_model=pb.PrivacyModel.Name(spec.privacy_model),
            local_mechanism=pb.LocalMechanism.Name(spec.local_mechanism),
            centre=list(spec.centre),
            shuffled=spec.HasField("shuffle"),
            params=params,
        )


@dataclass(frozen=True)
class CollectionStatus:
    """A collection's count and state (``GetStatus``, ``ListCollections``).

    Attributes
    ----------
    collection : Collection
    reports : int
        Reports counted so far.
    releasable : bool
        Whether ``reports ≥ min_reports`` (an estimate may be released).
    closed : bool
    rho_budget, rho_spent : float
        Central collections: the release budget ρ and what releases spent of it.
    """

    collection: Collection
    reports: int
    releasable: bool
    closed: bool
    rho_budget: float
    rho_spent: float

    @property
    def collection_id(self) -> str:
        return self.collection.collection_id

    @classmethod
    def from_proto(cls, status: pb.CollectionStatus) -> "CollectionStatus":
        return cls(
            collection=Collection.from_proto(status.params),
            reports=int(status.reports),
            releasable=status.releasable,
            closed=status.closed,
            rho_budget=status.rho_budget,
            rho_spent=status.rho_spent,
        )


def _target(url: str) -> Tuple[str, bool]:
    """``host:port`` and whether to use TLS, from ``http://``/``https://`` URLs or a bare address."""
    if "://" not in url:
        return url, False
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"expected http://HOST:PORT or https://HOST:PORT, not {url!r}")
    if parsed.path not in ("", "/"):
        raise ValueError(f"the aggregator's URL has no path: {url!r}")
    tls = parsed.scheme == "https"
    port = parsed.port or (443 if tls else 80)
    host = parsed.hostname
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}", tls


class Client:
    """A connection to an aggregator. Create it with :func:`connect`; close it with
    :meth:`close` or use it as a context manager.

    Every call raises a subclass of :class:`ldpcov.RpcError` (itself an
    :class:`ldpcov.LdpcovError`) carrying the gRPC status when the daemon refuses it.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        *,
        ca_cert: Optional[Union[str, bytes, os.PathLike]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        target, tls = _target(url)
        options = [
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
        ]
        if tls:
            root = None
            if ca_cert is not None:
                if isinstance(ca_cert, bytes):
                    root = ca_cert
                else:
                    with open(ca_cert, "rb") as f:
                        root = f.read()
            self._channel = grpc.secure_channel(
                target, grpc.ssl_channel_credentials(root_certificates=root), options
            )
        else:
            if ca_cert is not None:
                raise ValueError("ca_cert needs an https:// URL")
            self._channel = grpc.insecure_channel(target, options)
        self._stub = pb_grpc.AggregatorStub(self._channel)
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self.url = url
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------------------

    def _call(self, method: str, request: Message) -> Any:
        rpc: Callable[..., Any] = getattr(self._stub, method)
        try:
            return rpc(request, metadata=self._metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise from_grpc(method, e) from None

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -- collections ------------------------------------------------------------------

    def collections(self) -> List[CollectionStatus]:
        """Every collection on the daemon, ordered by id (``ListCollections``; the admin
        token where the daemon has one).

        Raises :class:`ldpcov.UnimplementedError` from a daemon that predates the RPC.
        """
        response = self._call("ListCollections", pb.ListCollectionsRequest())
        return [CollectionStatus.from_proto(s) for s in response.collections]

    def collections_frame(self) -> pd.DataFrame:
        """:meth:`collections` as a DataFrame indexed by collection id: dimension,
        reports, releasable, closed, privacy model, mechanism, moments, ε, δ, clip radius,
        min_reports and the variable names."""
        rows = []
        for s in self.collections():
            c = s.collection
            rows.append(
                {
                    "collection_id": c.collection_id,
                    "dim": c.dim,
                    "reports": s.reports,
                    "releasable": s.releasable,
                    "closed": s.closed,
                    "privacy_model": c.privacy_model,
                    "local_mechanism": c.local_mechanism,
                    "moments": c.moments,
                    "epsilon": c.epsilon,
                    "delta": c.delta,
                    "clip_radius": c.clip_radius,
                    "min_reports": c.min_reports,
                    "variable_names": c.variable_names,
                }
            )
        columns = [
            "collection_id", "dim", "reports", "releasable", "closed", "privacy_model",
            "local_mechanism", "moments", "epsilon", "delta", "clip_radius", "min_reports",
            "variable_names",
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=columns).set_index("collection_id")

    def collection(self, collection_id: str) -> Collection:
        """A collection's public parameters (``GetCollection``)."""
        params = self._call("GetCollection", pb.GetCollectionRequest(collection_id=collection_id))
        return Collection.from_proto(params)

    def status(self, collection_id: str) -> CollectionStatus:
        """A collection's report count and state (``GetStatus``)."""
        status = self._call("GetStatus", pb.GetStatusRequest(collection_id=collection_id))
        return CollectionStatus.from_proto(status)

    # -- estimates --------------------------------------------------------------------

    def estimate(
        self,
        collection_id: str,
        *,
        rule: Union[None, str, Message] = None,
        pca: int = 0,
        pca_of: str = "covariance",
        error_bars: bool = True,
        target: str = "covariance",
        precision_lambda: Optional[float] = None,
        release: Optional[pb.CentralRelease] = None,
        psd: bool = True,
        psd_floor: float = 0.0,
    ) -> CovarianceEstimate:
        """Releases the estimate (``GetEstimate``; the admin token where the daemon has one).

        Parameters
        ----------
        collection_id : str
        rule : None, str or a rule message
            None: the daemon's default (cross-validation over thresholds and spectral
            estimators). A name with the rule's defaults: ``"none"`` (the raw average),
            ``"universal"``, ``"ldp-noise"``, ``"adaptive"``, ``"cross-validated"``,
            ``"spectral"``, ``"factor"``, ``"bulk-shrink"``. Or the message itself for
            its settings, e.g. ``ldpcov.v1.ldpcov_pb2.FactorModel(rank=2)``.
        pca : int
            Number K of principal components to return (0: none; at most the dimension).
            Post-processing of the released matrix: no budget.
        pca_of : {"covariance", "correlation"}
            Components of ``covariance_`` or of ``correlation_`` (variables on
            different scales).
        error_bars : bool
            Ask for the raw average's error bars (``raw_covariance_``,
            ``standard_errors_``, the raw correlations and theirs: four more packed
            matrices on the wire; post-processing, no budget). Default True.
        target : {"covariance", "precision-ridge", "precision-glasso"}
        precision_lambda : float, optional
            The precision targets' penalty (default: cross-validated).
        release : ldpcov.v1.ldpcov_pb2.CentralRelease, optional
            Central collections only, and required there: see :func:`central_release`.
        psd : bool
            Project onto the positive semi-definite cone (default True).
        psd_floor : float
            Eigenvalue floor of the projection.

        Returns
        -------
        CovarianceEstimate
        """
        request = pb.GetEstimateRequest(
            collection_id=collection_id,
            principal_components=int(pca),
            error_bars=error_bars,
            skip_psd_projection=not psd,
            psd_floor=psd_floor,
        )
        if pca < 0:
            raise ValueError(f"pca must be ≥ 0, not {pca}")
        if pca_of not in ("covariance", "correlation"):
            raise ValueError(f"pca_of must be 'covariance' or 'correlation', not {pca_of!r}")
        request.principal_components_of_correlation = pca_of == "correlation"
        try:
            request.target = _TARGETS[target]
        except KeyError:
            raise ValueError(f"target must be one of {', '.join(_TARGETS)}, not {target!r}") from None
        if precision_lambda is not None:
            request.precision.SetInParent()
            request.precision.__setattr__("lambda", precision_lambda)
        if release is not None:
            request.release.CopyFrom(release)
        _set_rule(request, rule)
        message = self._call("GetEstimate", request)
        centre = None
        if message.moments != pb.MOMENTS_MEAN_AND_COVARIANCE:
            # The second moment is about the public centre: it is the estimate's location.
            centre = list(self.collection(collection_id).centre)
        return CovarianceEstimate(message, centre=centre)

    def plan(
        self,
        collection_id: str,
        *,
        users: Optional[int] = None,
        target_error: Optional[float] = None,
    ) -> planner.Plan:
        """The planner for a Gaussian local collection (see :mod:`ldpcov.planner`): the
        predicted Frobenius error of the raw average at ``users`` reports, and the users
        ``target_error`` needs."""
        params = self._call("GetCollection", pb.GetCollectionRequest(collection_id=collection_id))
        return planner.plan(params, users=users, target_error=target_error)


def _set_rule(request: pb.GetEstimateRequest, rule: Union[None, str, Message]) -> None:
    if rule is None:
        return
    if isinstance(rule, str):
        try:
            field = _RULES[rule]
        except KeyError:
            raise ValueError(f"unknown rule {rule!r}: one of {', '.join(_RULES)}") from None
        getattr(request, field).SetInParent()
        return
    if isinstance(rule, Message):
        oneof = request.DESCRIPTOR.oneofs_by_name["threshold"]
        for field in oneof.fields:
            if field.message_type.full_name == rule.DESCRIPTOR.full_name:
                getattr(request, field.name).CopyFrom(rule)
                return
        raise ValueError(f"{rule.DESCRIPTOR.full_name} is not a rule of GetEstimateRequest")
    raise TypeError(f"rule must be None, a name or a rule message, not {type(rule).__name__}")


def connect(
    url: str = "http://127.0.0.1:50051",
    token: Optional[str] = None,
    *,
    ca_cert: Optional[Union[str, bytes, os.PathLike]] = None,
    timeout: Optional[float] = None,
) -> Client:
    """Connects to an ``ldpcov-aggregator`` daemon.

    Parameters
    ----------
    url : str
        ``http://HOST:PORT``, or ``https://HOST:PORT`` for TLS (the CLI's ``--server``).
    token : str, optional
        The bearer token (the admin token for estimates and the list of collections).
        Default: the ``LDPCOV_TOKEN`` environment variable, as the CLI reads it, so that
        the secret stays out of the notebook.
    ca_cert : path or bytes, optional
        PEM CA certificate to trust for an ``https://`` daemon (default: the system's roots).
    timeout : float, optional
        Seconds before a call fails with ``DEADLINE_EXCEEDED``.

    The channel connects lazily: an unreachable daemon shows up at the first call as
    :class:`ldpcov.UnavailableError`.

    Examples
    --------
    >>> import ldpcov
    >>> client = ldpcov.connect("http://127.0.0.1:50051")              # doctest: +SKIP
    >>> est = client.estimate("survey", pca=3)                          # doctest: +SKIP
    >>> est.covariance_frame()                                          # doctest: +SKIP
    """
    if token is None:
        token = os.environ.get("LDPCOV_TOKEN") or None
    return Client(url, token, ca_cert=ca_cert, timeout=timeout)
