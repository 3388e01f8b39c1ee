"""The planner for the Gaussian reports: how far the raw average of ``n`` reports is from
the users' own second moment, and how many users a target error needs.

A port of the closed form in ``ldpcov_privacy::plan`` (``ldpcov-aggregator plan``) for
the two Gaussian local mechanisms, computed from the collection's public parameters
(:meth:`ldpcov.Client.collection`): the root mean square Frobenius norm of the noise in
the unbiased raw average, both triangles, in data units,

    error(n) = √(v / n),   v = p·s_d² + p(p − 1)·s_o²,

where ``s_d`` and ``s_o`` are one report's noise sd of a diagonal and of an off-diagonal
second-moment entry in data units (``R²·diagonal_noise_sd`` and
``R²·off_diagonal_noise_sd`` of ``CollectionParams``), and the users a target needs are
``⌈v / target²⌉``. Clipping bias and the users' own sampling variance are not counted:
it is the privacy noise alone, as in the Rust planner.

The rank-one report's noise depends on the users' mean squared norm and central
collections' on each release; for those, :func:`plan` raises :class:`PlannerError`
and points to ``ldpcov-aggregator plan``. Every estimate also carries the daemon's own
answer for its data: :attr:`ldpcov.CovarianceEstimate.verdict_` (``reports_needed``
for a target noise-to-signal ratio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ._errors import PlannerError
from .v1 import ldpcov_pb2 as pb

__all__ = ["Plan", "plan", "report_variance"]

_GAUSSIAN = {
    pb.LOCAL_MECHANISM_GAUSSIAN,
    pb.LOCAL_MECHANISM_GAUSSIAN_TRIU,
}


@dataclass(frozen=True)
class Plan:
    """What the planner predicts for one collection.

    Attributes
    ----------
    collection_id : str
    mechanism : str
        ``"LOCAL_MECHANISM_GAUSSIAN"`` or ``"LOCAL_MECHANISM_GAUSSIAN_TRIU"``.
    dim : int
    clip_radius : float
    report_variance : float
        ``v``: one report's total noise variance over the p × p second moment, data units².
    users : int or None
        The ``users`` asked about, and ``raw_average_error`` the predicted error there.
    raw_average_error : float or None
    target_error : float or None
        The ``target_error`` asked about, and ``users_for_target_error`` the users it needs.
    users_for_target_error : int or None
    """

    collection_id: str
    mechanism: str
    dim: int
    clip_radius: float
    report_variance: float
    users: Optional[int] = None
    raw_average_error: Optional[float] = None
    target_error: Optional[float] = None
    users_for_target_error: Optional[int] = None


def report_variance(params: pb.CollectionParams) -> float:
    """``v`` of the module docs for a Gaussian local collection, data units².

    Raises
    ------
    PlannerError
        For a central or a rank-one collection (no closed form here).
    """
    spec = params.spec
    if spec.privacy_model == pb.PRIVACY_MODEL_CENTRAL:
        raise PlannerError(
            f"collection {spec.collection_id!r} is central: its reports carry no noise, "
            "each release adds its own (see the estimate's error bars)"
        )
    if spec.local_mechanism not in _GAUSSIAN:
        raise PlannerError(
            f"collection {spec.collection_id!r} uses "
            f"{pb.LocalMechanism.Name(spec.local_mechanism)}: its noise depends on the users' "
            "mean squared norm; run `ldpcov-aggregator plan --mechanism rank-one "
            "--mean-square-norm S ...` for it"
        )
    p = float(spec.dim)
    r2 = spec.clip_radius * spec.clip_radius
    diagonal = r2 * params.diagonal_noise_sd
    off_diagonal = r2 * params.off_diagonal_noise_sd
    return p * diagonal * diagonal + p * (p - 1.0) * off_diagonal * off_diagonal


def plan(
    params: pb.CollectionParams,
    *,
    users: Optional[int] = None,
    target_error: Optional[float] = None,
) -> Plan:
    """The predicted error of the raw average at ``users`` reports and/or the users
    ``target_error`` (Frobenius norm, data units) needs, for a Gaussian local collection.

    Examples
    --------
    >>> p = client.plan("survey", users=20_000, target_error=0.1)   # doctest: +SKIP
    >>> p.raw_average_error, p.users_for_target_error                # doctest: +SKIP
    """
    v = report_variance(params)
    error = None
    if users is not None:
        if users < 1:
            raise PlannerError(f"users must be at least 1, not {users}")
        error = math.sqrt(v / users)
    needed = None
    if target_error is not None:
        if not target_error > 0:
            raise PlannerError(f"target_error must be positive, not {target_error}")
        needed = max(1, math.ceil(v / (target_error * target_error)))
    return Plan(
        collection_id=params.spec.collection_id,
        mechanism=pb.LocalMechanism.Name(params.spec.local_mechanism),
        dim=int(params.spec.dim),
        clip_radius=params.spec.clip_radius,
        report_variance=v,
        users=users,
        raw_average_error=error,
        target_error=target_error,
        users_for_target_error=needed,
    )
