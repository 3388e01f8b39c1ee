"""ldpcov for analysts: covariance estimates under local differential privacy from an
``ldpcov-aggregator`` daemon, as numpy arrays and pandas DataFrames labelled with the
variables' names, with scikit-learn's covariance estimators' attribute names.

>>> import ldpcov
>>> client = ldpcov.connect("http://127.0.0.1:50051", token="...")   # doctest: +SKIP
>>> est = client.estimate("survey", pca=3)                            # doctest: +SKIP
>>> est.covariance_frame()                                            # doctest: +SKIP
"""

from . import planner
from ._client import Client, Collection, CollectionStatus, central_release, connect
from ._errors import (
    AuthenticationError,
    BudgetExhaustedError,
    InvalidRequestError,
    LdpcovError,
    NotFoundError,
    NotReleasableError,
    PermissionDeniedError,
    PlannerError,
    RpcError,
    UnavailableError,
    UnimplementedError,
)
from ._estimate import (
    CovarianceEstimate,
    InsufficientSignalWarning,
    Verdict,
    unpack_upper_triangle,
)
from .planner import Plan

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BudgetExhaustedError",
    "Client",
    "Collection",
    "CollectionStatus",
    "CovarianceEstimate",
    "InvalidRequestError",
    "LdpcovError",
    "NotFoundError",
    "NotReleasableError",
    "PermissionDeniedError",
    "Plan",
    "PlannerError",
    "RpcError",
    "UnavailableError",
    "UnimplementedError",
    "Verdict",
    "central_release",
    "connect",
    "planner",
    "unpack_upper_triangle",
]
