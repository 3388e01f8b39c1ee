from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Encoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENCODING_UNSPECIFIED: _ClassVar[Encoding]
    ENCODING_I32_LE: _ClassVar[Encoding]
    ENCODING_I16_LE: _ClassVar[Encoding]
    ENCODING_I8: _ClassVar[Encoding]
    ENCODING_RAW_I32_LE: _ClassVar[Encoding]

class PrivacyModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIVACY_MODEL_UNSPECIFIED: _ClassVar[PrivacyModel]
    PRIVACY_MODEL_LOCAL: _ClassVar[PrivacyModel]
    PRIVACY_MODEL_CENTRAL: _ClassVar[PrivacyModel]
    PRIVACY_MODEL_TWO_AGGREGATOR: _ClassVar[PrivacyModel]

class Moments(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOMENTS_UNSPECIFIED: _ClassVar[Moments]
    MOMENTS_SECOND_MOMENT: _ClassVar[Moments]
    MOMENTS_MEAN_AND_COVARIANCE: _ClassVar[Moments]

class LocalMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCAL_MECHANISM_UNSPECIFIED: _ClassVar[LocalMechanism]
    LOCAL_MECHANISM_GAUSSIAN: _ClassVar[LocalMechanism]
    LOCAL_MECHANISM_GAUSSIAN_TRIU: _ClassVar[LocalMechanism]
    LOCAL_MECHANISM_RANK_ONE: _ClassVar[LocalMechanism]

class CentralWeighting(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CENTRAL_WEIGHTING_UNSPECIFIED: _ClassVar[CentralWeighting]
    CENTRAL_WEIGHTING_SVEC: _ClassVar[CentralWeighting]
    CENTRAL_WEIGHTING_TRIU: _ClassVar[CentralWeighting]

class HpkeKeyState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HPKE_KEY_STATE_UNSPECIFIED: _ClassVar[HpkeKeyState]
    HPKE_KEY_STATE_PENDING: _ClassVar[HpkeKeyState]
    HPKE_KEY_STATE_ACTIVE: _ClassVar[HpkeKeyState]
    HPKE_KEY_STATE_RETIRED: _ClassVar[HpkeKeyState]
    HPKE_KEY_STATE_EXPIRED: _ClassVar[HpkeKeyState]

class SpectralLoss(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPECTRAL_LOSS_UNSPECIFIED: _ClassVar[SpectralLoss]
    SPECTRAL_LOSS_FROBENIUS: _ClassVar[SpectralLoss]
    SPECTRAL_LOSS_OPERATOR: _ClassVar[SpectralLoss]
    SPECTRAL_LOSS_BALANCED: _ClassVar[SpectralLoss]

class ThresholdKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    THRESHOLD_KIND_UNSPECIFIED: _ClassVar[ThresholdKind]
    THRESHOLD_KIND_HARD: _ClassVar[ThresholdKind]
    THRESHOLD_KIND_SOFT: _ClassVar[ThresholdKind]

class EstimateTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ESTIMATE_TARGET_UNSPECIFIED: _ClassVar[EstimateTarget]
    ESTIMATE_TARGET_COVARIANCE: _ClassVar[EstimateTarget]
    ESTIMATE_TARGET_PRECISION_RIDGE: _ClassVar[EstimateTarget]
    ESTIMATE_TARGET_PRECISION_GLASSO: _ClassVar[EstimateTarget]

class CentralMechanism(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CENTRAL_MECHANISM_UNSPECIFIED: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_GAUSS_COV: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_SEPARATE_COV: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_LAPLACE_COV: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_ADAPTIVE_COV: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_COMPRESSED_NOT_DP: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_GAUSS_COV_FOLDS: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_SEPARATE_COV_LAPLACE: _ClassVar[CentralMechanism]
    CENTRAL_MECHANISM_ADAPTIVE_COV_LAPLACE: _ClassVar[CentralMechanism]

class VerdictState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_STATE_UNSPECIFIED: _ClassVar[VerdictState]
    VERDICT_STATE_SUFFICIENT: _ClassVar[VerdictState]
    VERDICT_STATE_AT_THE_EDGE: _ClassVar[VerdictState]
    VERDICT_STATE_INSUFFICIENT: _ClassVar[VerdictState]
ENCODING_UNSPECIFIED: Encoding
ENCODING_I32_LE: Encoding
ENCODING_I16_LE: Encoding
ENCODING_I8: Encoding
ENCODING_RAW_I32_LE: Encoding
PRIVACY_MODEL_UNSPECIFIED: PrivacyModel
PRIVACY_MODEL_LOCAL: PrivacyModel
PRIVACY_MODEL_CENTRAL: PrivacyModel
PRIVACY_MODEL_TWO_AGGREGATOR: PrivacyModel
MOMENTS_UNSPECIFIED: Moments
MOMENTS_SECOND_MOMENT: Moments
MOMENTS_MEAN_AND_COVARIANCE: Moments
LOCAL_MECHANISM_UNSPECIFIED: LocalMechanism
LOCAL_MECHANISM_GAUSSIAN: LocalMechanism
LOCAL_MECHANISM_GAUSSIAN_TRIU: LocalMechanism
LOCAL_MECHANISM_RANK_ONE: LocalMechanism
CENTRAL_WEIGHTING_UNSPECIFIED: CentralWeighting
CENTRAL_WEIGHTING_SVEC: CentralWeighting
CENTRAL_WEIGHTING_TRIU: CentralWeighting
HPKE_KEY_STATE_UNSPECIFIED: HpkeKeyState
HPKE_KEY_STATE_PENDING: HpkeKeyState
HPKE_KEY_STATE_ACTIVE: HpkeKeyState
HPKE_KEY_STATE_RETIRED: HpkeKeyState
HPKE_KEY_STATE_EXPIRED: HpkeKeyState
SPECTRAL_LOSS_UNSPECIFIED: SpectralLoss
SPECTRAL_LOSS_FROBENIUS: SpectralLoss
SPECTRAL_LOSS_OPERATOR: SpectralLoss
SPECTRAL_LOSS_BALANCED: SpectralLoss
THRESHOLD_KIND_UNSPECIFIED: ThresholdKind
THRESHOLD_KIND_HARD: ThresholdKind
THRESHOLD_KIND_SOFT: ThresholdKind
ESTIMATE_TARGET_UNSPECIFIED: EstimateTarget
ESTIMATE_TARGET_COVARIANCE: EstimateTarget
ESTIMATE_TARGET_PRECISION_RIDGE: EstimateTarget
ESTIMATE_TARGET_PRECISION_GLASSO: EstimateTarget
CENTRAL_MECHANISM_UNSPECIFIED: CentralMechanism
CENTRAL_MECHANISM_GAUSS_COV: CentralMechanism
CENTRAL_MECHANISM_SEPARATE_COV: CentralMechanism
CENTRAL_MECHANISM_LAPLACE_COV: CentralMechanism
CENTRAL_MECHANISM_ADAPTIVE_COV: CentralMechanism
CENTRAL_MECHANISM_COMPRESSED_NOT_DP: CentralMechanism
CENTRAL_MECHANISM_GAUSS_COV_FOLDS: CentralMechanism
CENTRAL_MECHANISM_SEPARATE_COV_LAPLACE: CentralMechanism
CENTRAL_MECHANISM_ADAPTIVE_COV_LAPLACE: CentralMechanism
VERDICT_STATE_UNSPECIFIED: VerdictState
VERDICT_STATE_SUFFICIENT: VerdictState
VERDICT_STATE_AT_THE_EDGE: VerdictState
VERDICT_STATE_INSUFFICIENT: VerdictState

class CollectionSpec(_message.Message):
    __slots__ = ("collection_id", "dim", "epsilon", "delta", "clip_radius", "min_reports", "encoding", "moments", "centre", "ordered_variables", "variable_names", "privacy_model", "norm_bins", "allow_compressed_release", "local_mechanism", "central_weighting", "shuffle", "radius_phase")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    CLIP_RADIUS_FIELD_NUMBER: _ClassVar[int]
    MIN_REPORTS_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    CENTRE_FIELD_NUMBER: _ClassVar[int]
    ORDERED_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_NAMES_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_MODEL_FIELD_NUMBER: _ClassVar[int]
    NORM_BINS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_COMPRESSED_RELEASE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_MECHANISM_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_WEIGHTING_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    RADIUS_PHASE_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    dim: int
    epsilon: float
    delta: float
    clip_radius: float
    min_reports: int
    encoding: Encoding
    moments: Moments
    centre: _containers.RepeatedScalarFieldContainer[float]
    ordered_variables: bool
    variable_names: _containers.RepeatedScalarFieldContainer[str]
    privacy_model: PrivacyModel
    norm_bins: int
    allow_compressed_release: bool
    local_mechanism: LocalMechanism
    central_weighting: CentralWeighting
    shuffle: ShuffleSpec
    radius_phase: RadiusPhaseSpec
    def __init__(self, collection_id: _Optional[str] = ..., dim: _Optional[int] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., clip_radius: _Optional[float] = ..., min_reports: _Optional[int] = ..., encoding: _Optional[_Union[Encoding, str]] = ..., moments: _Optional[_Union[Moments, str]] = ..., centre: _Optional[_Iterable[float]] = ..., ordered_variables: _Optional[bool] = ..., variable_names: _Optional[_Iterable[str]] = ..., privacy_model: _Optional[_Union[PrivacyModel, str]] = ..., norm_bins: _Optional[int] = ..., allow_compressed_release: _Optional[bool] = ..., local_mechanism: _Optional[_Union[LocalMechanism, str]] = ..., central_weighting: _Optional[_Union[CentralWeighting, str]] = ..., shuffle: _Optional[_Union[ShuffleSpec, _Mapping]] = ..., radius_phase: _Optional[_Union[RadiusPhaseSpec, _Mapping]] = ...) -> None: ...

class RadiusPhaseSpec(_message.Message):
    __slots__ = ("share", "smallest_radius", "largest_radius", "radii")
    SHARE_FIELD_NUMBER: _ClassVar[int]
    SMALLEST_RADIUS_FIELD_NUMBER: _ClassVar[int]
    LARGEST_RADIUS_FIELD_NUMBER: _ClassVar[int]
    RADII_FIELD_NUMBER: _ClassVar[int]
    share: float
    smallest_radius: float
    largest_radius: float
    radii: int
    def __init__(self, share: _Optional[float] = ..., smallest_radius: _Optional[float] = ..., largest_radius: _Optional[float] = ..., radii: _Optional[int] = ...) -> None: ...

class ShuffleSpec(_message.Message):
    __slots__ = ("min_batch_size", "batch_window_seconds", "central_delta", "key_rotation_seconds", "key_grace_rotations")
    MIN_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BATCH_WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    KEY_ROTATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    KEY_GRACE_ROTATIONS_FIELD_NUMBER: _ClassVar[int]
    min_batch_size: int
    batch_window_seconds: int
    central_delta: float
    key_rotation_seconds: int
    key_grace_rotations: int
    def __init__(self, min_batch_size: _Optional[int] = ..., batch_window_seconds: _Optional[int] = ..., central_delta: _Optional[float] = ..., key_rotation_seconds: _Optional[int] = ..., key_grace_rotations: _Optional[int] = ...) -> None: ...

class CollectionParams(_message.Message):
    __slots__ = ("spec", "entries", "grid_bits", "sensitivity", "sigma", "rho", "max_abs_grid_value", "calibration", "wire_step", "wire_max", "mean_weight", "mean_entries", "base_sensitivity", "diagonal_noise_sd", "off_diagonal_noise_sd", "mean_noise_sd", "rank_one", "shuffle", "two_aggregator", "radius_phase")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    GRID_BITS_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_GRID_VALUE_FIELD_NUMBER: _ClassVar[int]
    CALIBRATION_FIELD_NUMBER: _ClassVar[int]
    WIRE_STEP_FIELD_NUMBER: _ClassVar[int]
    WIRE_MAX_FIELD_NUMBER: _ClassVar[int]
    MEAN_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEAN_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BASE_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    DIAGONAL_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    OFF_DIAGONAL_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    MEAN_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    RANK_ONE_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    TWO_AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    RADIUS_PHASE_FIELD_NUMBER: _ClassVar[int]
    spec: CollectionSpec
    entries: int
    grid_bits: int
    sensitivity: float
    sigma: float
    rho: float
    max_abs_grid_value: int
    calibration: str
    wire_step: int
    wire_max: int
    mean_weight: float
    mean_entries: int
    base_sensitivity: float
    diagonal_noise_sd: float
    off_diagonal_noise_sd: float
    mean_noise_sd: float
    rank_one: RankOneParams
    shuffle: ShuffleParams
    two_aggregator: TwoAggregatorParams
    radius_phase: RadiusPhaseParams
    def __init__(self, spec: _Optional[_Union[CollectionSpec, _Mapping]] = ..., entries: _Optional[int] = ..., grid_bits: _Optional[int] = ..., sensitivity: _Optional[float] = ..., sigma: _Optional[float] = ..., rho: _Optional[float] = ..., max_abs_grid_value: _Optional[int] = ..., calibration: _Optional[str] = ..., wire_step: _Optional[int] = ..., wire_max: _Optional[int] = ..., mean_weight: _Optional[float] = ..., mean_entries: _Optional[int] = ..., base_sensitivity: _Optional[float] = ..., diagonal_noise_sd: _Optional[float] = ..., off_diagonal_noise_sd: _Optional[float] = ..., mean_noise_sd: _Optional[float] = ..., rank_one: _Optional[_Union[RankOneParams, _Mapping]] = ..., shuffle: _Optional[_Union[ShuffleParams, _Mapping]] = ..., two_aggregator: _Optional[_Union[TwoAggregatorParams, _Mapping]] = ..., radius_phase: _Optional[_Union[RadiusPhaseParams, _Mapping]] = ...) -> None: ...

class RadiusPhaseParams(_message.Message):
    __slots__ = ("phase_collection_id", "radii", "phase_epsilon", "phase_rho", "main_epsilon", "radius_chosen")
    PHASE_COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    RADII_FIELD_NUMBER: _ClassVar[int]
    PHASE_EPSILON_FIELD_NUMBER: _ClassVar[int]
    PHASE_RHO_FIELD_NUMBER: _ClassVar[int]
    MAIN_EPSILON_FIELD_NUMBER: _ClassVar[int]
    RADIUS_CHOSEN_FIELD_NUMBER: _ClassVar[int]
    phase_collection_id: str
    radii: _containers.RepeatedScalarFieldContainer[float]
    phase_epsilon: float
    phase_rho: float
    main_epsilon: float
    radius_chosen: bool
    def __init__(self, phase_collection_id: _Optional[str] = ..., radii: _Optional[_Iterable[float]] = ..., phase_epsilon: _Optional[float] = ..., phase_rho: _Optional[float] = ..., main_epsilon: _Optional[float] = ..., radius_chosen: _Optional[bool] = ...) -> None: ...

class TwoAggregatorParams(_message.Message):
    __slots__ = ("coordinate_grid_bits", "range_bits", "norm_bound", "helper_keys")
    COORDINATE_GRID_BITS_FIELD_NUMBER: _ClassVar[int]
    RANGE_BITS_FIELD_NUMBER: _ClassVar[int]
    NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    HELPER_KEYS_FIELD_NUMBER: _ClassVar[int]
    coordinate_grid_bits: int
    range_bits: int
    norm_bound: int
    helper_keys: _containers.RepeatedCompositeFieldContainer[HpkePublicKey]
    def __init__(self, coordinate_grid_bits: _Optional[int] = ..., range_bits: _Optional[int] = ..., norm_bound: _Optional[int] = ..., helper_keys: _Optional[_Iterable[_Union[HpkePublicKey, _Mapping]]] = ...) -> None: ...

class TwoAggregatorReport(_message.Message):
    __slots__ = ("collection_id", "report_id", "public_share", "leader_share", "helper_share")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_SHARE_FIELD_NUMBER: _ClassVar[int]
    LEADER_SHARE_FIELD_NUMBER: _ClassVar[int]
    HELPER_SHARE_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    report_id: bytes
    public_share: bytes
    leader_share: bytes
    helper_share: SealedReport
    def __init__(self, collection_id: _Optional[str] = ..., report_id: _Optional[bytes] = ..., public_share: _Optional[bytes] = ..., leader_share: _Optional[bytes] = ..., helper_share: _Optional[_Union[SealedReport, _Mapping]] = ...) -> None: ...

class UploadTwoAggregatorReportResponse(_message.Message):
    __slots__ = ("duplicate",)
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: _Optional[bool] = ...) -> None: ...

class ReportToVerify(_message.Message):
    __slots__ = ("report_id", "public_share", "helper_share", "leader_verifier_share")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_SHARE_FIELD_NUMBER: _ClassVar[int]
    HELPER_SHARE_FIELD_NUMBER: _ClassVar[int]
    LEADER_VERIFIER_SHARE_FIELD_NUMBER: _ClassVar[int]
    report_id: bytes
    public_share: bytes
    helper_share: SealedReport
    leader_verifier_share: bytes
    def __init__(self, report_id: _Optional[bytes] = ..., public_share: _Optional[bytes] = ..., helper_share: _Optional[_Union[SealedReport, _Mapping]] = ..., leader_verifier_share: _Optional[bytes] = ...) -> None: ...

class VerifySharesRequest(_message.Message):
    __slots__ = ("collection_id", "reports")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    reports: _containers.RepeatedCompositeFieldContainer[ReportToVerify]
    def __init__(self, collection_id: _Optional[str] = ..., reports: _Optional[_Iterable[_Union[ReportToVerify, _Mapping]]] = ...) -> None: ...

class ShareVerdict(_message.Message):
    __slots__ = ("report_id", "verifier_message", "rejected")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    report_id: bytes
    verifier_message: bytes
    rejected: str
    def __init__(self, report_id: _Optional[bytes] = ..., verifier_message: _Optional[bytes] = ..., rejected: _Optional[str] = ...) -> None: ...

class VerifySharesResponse(_message.Message):
    __slots__ = ("verdicts",)
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[ShareVerdict]
    def __init__(self, verdicts: _Optional[_Iterable[_Union[ShareVerdict, _Mapping]]] = ...) -> None: ...

class ReleaseShareRequest(_message.Message):
    __slots__ = ("collection_id", "release", "reports")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    release: CentralRelease
    reports: int
    def __init__(self, collection_id: _Optional[str] = ..., release: _Optional[_Union[CentralRelease, _Mapping]] = ..., reports: _Optional[int] = ...) -> None: ...

class ReleaseShareResponse(_message.Message):
    __slots__ = ("noisy_share", "reports", "noise_sd_grid", "off_diagonal_noise_sd_grid", "rho_spent")
    NOISY_SHARE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    NOISE_SD_GRID_FIELD_NUMBER: _ClassVar[int]
    OFF_DIAGONAL_NOISE_SD_GRID_FIELD_NUMBER: _ClassVar[int]
    RHO_SPENT_FIELD_NUMBER: _ClassVar[int]
    noisy_share: bytes
    reports: int
    noise_sd_grid: float
    off_diagonal_noise_sd_grid: float
    rho_spent: float
    def __init__(self, noisy_share: _Optional[bytes] = ..., reports: _Optional[int] = ..., noise_sd_grid: _Optional[float] = ..., off_diagonal_noise_sd_grid: _Optional[float] = ..., rho_spent: _Optional[float] = ...) -> None: ...

class ShuffleParams(_message.Message):
    __slots__ = ("local_epsilon", "central_epsilon", "central_delta", "min_batch_size", "keys", "relay_key")
    LOCAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    MIN_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    RELAY_KEY_FIELD_NUMBER: _ClassVar[int]
    local_epsilon: float
    central_epsilon: float
    central_delta: float
    min_batch_size: int
    keys: _containers.RepeatedCompositeFieldContainer[HpkePublicKey]
    relay_key: HpkePublicKey
    def __init__(self, local_epsilon: _Optional[float] = ..., central_epsilon: _Optional[float] = ..., central_delta: _Optional[float] = ..., min_batch_size: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[HpkePublicKey, _Mapping]]] = ..., relay_key: _Optional[_Union[HpkePublicKey, _Mapping]] = ...) -> None: ...

class HpkePublicKey(_message.Message):
    __slots__ = ("key_id", "kem_id", "kdf_id", "aead_id", "public_key", "state", "not_before", "not_after", "active_until")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KEM_ID_FIELD_NUMBER: _ClassVar[int]
    KDF_ID_FIELD_NUMBER: _ClassVar[int]
    AEAD_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    NOT_AFTER_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    kem_id: int
    kdf_id: int
    aead_id: int
    public_key: bytes
    state: HpkeKeyState
    not_before: int
    not_after: int
    active_until: int
    def __init__(self, key_id: _Optional[int] = ..., kem_id: _Optional[int] = ..., kdf_id: _Optional[int] = ..., aead_id: _Optional[int] = ..., public_key: _Optional[bytes] = ..., state: _Optional[_Union[HpkeKeyState, str]] = ..., not_before: _Optional[int] = ..., not_after: _Optional[int] = ..., active_until: _Optional[int] = ...) -> None: ...

class SealedReport(_message.Message):
    __slots__ = ("key_id", "enc", "ciphertext")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ENC_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    enc: bytes
    ciphertext: bytes
    def __init__(self, key_id: _Optional[int] = ..., enc: _Optional[bytes] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class RelayReport(_message.Message):
    __slots__ = ("collection_id", "submission_id", "outer")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTER_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    submission_id: bytes
    outer: SealedReport
    def __init__(self, collection_id: _Optional[str] = ..., submission_id: _Optional[bytes] = ..., outer: _Optional[_Union[SealedReport, _Mapping]] = ...) -> None: ...

class RelayReportResponse(_message.Message):
    __slots__ = ("duplicate",)
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: _Optional[bool] = ...) -> None: ...

class RelayStatusRequest(_message.Message):
    __slots__ = ("collection_id",)
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    def __init__(self, collection_id: _Optional[str] = ...) -> None: ...

class RelayStatus(_message.Message):
    __slots__ = ("collection_id", "window_reports", "window_opened", "pending_batches", "pending_batch_reports", "forwarded_batches", "forwarded_reports", "window_new_devices", "new_device_cap", "recent_batches", "held", "key_conflicts", "last_key_conflict", "retired", "retired_at", "retired_window_reports", "retired_batch_reports", "aggregator")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_REPORTS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_OPENED_FIELD_NUMBER: _ClassVar[int]
    PENDING_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PENDING_BATCH_REPORTS_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_REPORTS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_NEW_DEVICES_FIELD_NUMBER: _ClassVar[int]
    NEW_DEVICE_CAP_FIELD_NUMBER: _ClassVar[int]
    RECENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    KEY_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    LAST_KEY_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    RETIRED_AT_FIELD_NUMBER: _ClassVar[int]
    RETIRED_WINDOW_REPORTS_FIELD_NUMBER: _ClassVar[int]
    RETIRED_BATCH_REPORTS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    window_reports: int
    window_opened: int
    pending_batches: int
    pending_batch_reports: int
    forwarded_batches: int
    forwarded_reports: int
    window_new_devices: int
    new_device_cap: int
    recent_batches: _containers.RepeatedCompositeFieldContainer[RelayBatchRecord]
    held: str
    key_conflicts: int
    last_key_conflict: int
    retired: str
    retired_at: int
    retired_window_reports: int
    retired_batch_reports: int
    aggregator: str
    def __init__(self, collection_id: _Optional[str] = ..., window_reports: _Optional[int] = ..., window_opened: _Optional[int] = ..., pending_batches: _Optional[int] = ..., pending_batch_reports: _Optional[int] = ..., forwarded_batches: _Optional[int] = ..., forwarded_reports: _Optional[int] = ..., window_new_devices: _Optional[int] = ..., new_device_cap: _Optional[int] = ..., recent_batches: _Optional[_Iterable[_Union[RelayBatchRecord, _Mapping]]] = ..., held: _Optional[str] = ..., key_conflicts: _Optional[int] = ..., last_key_conflict: _Optional[int] = ..., retired: _Optional[str] = ..., retired_at: _Optional[int] = ..., retired_window_reports: _Optional[int] = ..., retired_batch_reports: _Optional[int] = ..., aggregator: _Optional[str] = ...) -> None: ...

class RelayBatchRecord(_message.Message):
    __slots__ = ("formed", "reports", "new_devices")
    FORMED_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    NEW_DEVICES_FIELD_NUMBER: _ClassVar[int]
    formed: int
    reports: int
    new_devices: int
    def __init__(self, formed: _Optional[int] = ..., reports: _Optional[int] = ..., new_devices: _Optional[int] = ...) -> None: ...

class ShuffledBatchChunk(_message.Message):
    __slots__ = ("collection_id", "batch_id", "batch_size", "reports")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    batch_id: bytes
    batch_size: int
    reports: _containers.RepeatedCompositeFieldContainer[SealedReport]
    def __init__(self, collection_id: _Optional[str] = ..., batch_id: _Optional[bytes] = ..., batch_size: _Optional[int] = ..., reports: _Optional[_Iterable[_Union[SealedReport, _Mapping]]] = ...) -> None: ...

class RefusedReport(_message.Message):
    __slots__ = ("index", "code", "message")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    code: int
    message: str
    def __init__(self, index: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ShuffledBatchResponse(_message.Message):
    __slots__ = ("accepted", "duplicates", "refused")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    refused: _containers.RepeatedCompositeFieldContainer[RefusedReport]
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ..., refused: _Optional[_Iterable[_Union[RefusedReport, _Mapping]]] = ...) -> None: ...

class RankOneParams(_message.Message):
    __slots__ = ("gamma_units", "gamma", "nominal_epsilon", "eta", "kappa", "mean_scale", "dither_variance", "expected_rounds")
    GAMMA_UNITS_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    KAPPA_FIELD_NUMBER: _ClassVar[int]
    MEAN_SCALE_FIELD_NUMBER: _ClassVar[int]
    DITHER_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    gamma_units: int
    gamma: float
    nominal_epsilon: float
    eta: float
    kappa: float
    mean_scale: float
    dither_variance: float
    expected_rounds: float
    def __init__(self, gamma_units: _Optional[int] = ..., gamma: _Optional[float] = ..., nominal_epsilon: _Optional[float] = ..., eta: _Optional[float] = ..., kappa: _Optional[float] = ..., mean_scale: _Optional[float] = ..., dither_variance: _Optional[float] = ..., expected_rounds: _Optional[float] = ...) -> None: ...

class CreateCollectionRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: CollectionSpec
    def __init__(self, spec: _Optional[_Union[CollectionSpec, _Mapping]] = ...) -> None: ...

class GetCollectionRequest(_message.Message):
    __slots__ = ("collection_id",)
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    def __init__(self, collection_id: _Optional[str] = ...) -> None: ...

class Report(_message.Message):
    __slots__ = ("collection_id", "report_id", "encoding", "payload")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    report_id: bytes
    encoding: Encoding
    payload: bytes
    def __init__(self, collection_id: _Optional[str] = ..., report_id: _Optional[bytes] = ..., encoding: _Optional[_Union[Encoding, str]] = ..., payload: _Optional[bytes] = ...) -> None: ...

class SubmitReportResponse(_message.Message):
    __slots__ = ("duplicate",)
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: _Optional[bool] = ...) -> None: ...

class SubmitReportsResponse(_message.Message):
    __slots__ = ("accepted", "duplicates")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("collection_id",)
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    def __init__(self, collection_id: _Optional[str] = ...) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections",)
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[CollectionStatus]
    def __init__(self, collections: _Optional[_Iterable[_Union[CollectionStatus, _Mapping]]] = ...) -> None: ...

class CollectionStatus(_message.Message):
    __slots__ = ("params", "reports", "releasable", "closed", "rho_budget", "rho_spent", "shuffle_delivered")
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    RELEASABLE_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    RHO_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RHO_SPENT_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    params: CollectionParams
    reports: int
    releasable: bool
    closed: bool
    rho_budget: float
    rho_spent: float
    shuffle_delivered: ShuffleDelivered
    def __init__(self, params: _Optional[_Union[CollectionParams, _Mapping]] = ..., reports: _Optional[int] = ..., releasable: _Optional[bool] = ..., closed: _Optional[bool] = ..., rho_budget: _Optional[float] = ..., rho_spent: _Optional[float] = ..., shuffle_delivered: _Optional[_Union[ShuffleDelivered, _Mapping]] = ...) -> None: ...

class ShuffleDelivered(_message.Message):
    __slots__ = ("batches", "smallest_batch", "central_epsilon", "central_delta")
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    SMALLEST_BATCH_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_EPSILON_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    batches: int
    smallest_batch: int
    central_epsilon: float
    central_delta: float
    def __init__(self, batches: _Optional[int] = ..., smallest_batch: _Optional[int] = ..., central_epsilon: _Optional[float] = ..., central_delta: _Optional[float] = ...) -> None: ...

class NoThreshold(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UniversalThreshold(_message.Message):
    __slots__ = ("gamma", "c", "threshold_diagonal")
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    gamma: float
    c: float
    threshold_diagonal: bool
    def __init__(self, gamma: _Optional[float] = ..., c: _Optional[float] = ..., threshold_diagonal: _Optional[bool] = ...) -> None: ...

class LdpNoiseThreshold(_message.Message):
    __slots__ = ("xi", "threshold_diagonal")
    XI_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    xi: float
    threshold_diagonal: bool
    def __init__(self, xi: _Optional[float] = ..., threshold_diagonal: _Optional[bool] = ...) -> None: ...

class AdaptiveThreshold(_message.Message):
    __slots__ = ("eta", "threshold_diagonal")
    ETA_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    eta: float
    threshold_diagonal: bool
    def __init__(self, eta: _Optional[float] = ..., threshold_diagonal: _Optional[bool] = ...) -> None: ...

class CrossValidatedThreshold(_message.Message):
    __slots__ = ("noise_scales", "adaptive_scales", "threshold_diagonal", "diagonal_shrinkage", "bandwidths", "unordered_variables", "no_spectral", "smallest_mean_threshold", "no_stacking", "no_trivial_estimates")
    NOISE_SCALES_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_SCALES_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    DIAGONAL_SHRINKAGE_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTHS_FIELD_NUMBER: _ClassVar[int]
    UNORDERED_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    NO_SPECTRAL_FIELD_NUMBER: _ClassVar[int]
    SMALLEST_MEAN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    NO_STACKING_FIELD_NUMBER: _ClassVar[int]
    NO_TRIVIAL_ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    noise_scales: _containers.RepeatedScalarFieldContainer[float]
    adaptive_scales: _containers.RepeatedScalarFieldContainer[float]
    threshold_diagonal: bool
    diagonal_shrinkage: _containers.RepeatedScalarFieldContainer[float]
    bandwidths: _containers.RepeatedScalarFieldContainer[int]
    unordered_variables: bool
    no_spectral: bool
    smallest_mean_threshold: bool
    no_stacking: bool
    no_trivial_estimates: bool
    def __init__(self, noise_scales: _Optional[_Iterable[float]] = ..., adaptive_scales: _Optional[_Iterable[float]] = ..., threshold_diagonal: _Optional[bool] = ..., diagonal_shrinkage: _Optional[_Iterable[float]] = ..., bandwidths: _Optional[_Iterable[int]] = ..., unordered_variables: _Optional[bool] = ..., no_spectral: _Optional[bool] = ..., smallest_mean_threshold: _Optional[bool] = ..., no_stacking: _Optional[bool] = ..., no_trivial_estimates: _Optional[bool] = ...) -> None: ...

class SpectralShrinkage(_message.Message):
    __slots__ = ("loss", "rank")
    LOSS_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    loss: SpectralLoss
    rank: int
    def __init__(self, loss: _Optional[_Union[SpectralLoss, str]] = ..., rank: _Optional[int] = ...) -> None: ...

class FactorModel(_message.Message):
    __slots__ = ("rank",)
    RANK_FIELD_NUMBER: _ClassVar[int]
    rank: int
    def __init__(self, rank: _Optional[int] = ...) -> None: ...

class BulkShrinkage(_message.Message):
    __slots__ = ("alphas", "taus")
    ALPHAS_FIELD_NUMBER: _ClassVar[int]
    TAUS_FIELD_NUMBER: _ClassVar[int]
    alphas: _containers.RepeatedScalarFieldContainer[float]
    taus: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, alphas: _Optional[_Iterable[float]] = ..., taus: _Optional[_Iterable[float]] = ...) -> None: ...

class PrecisionParams(_message.Message):
    __slots__ = ("rho", "max_iterations", "penalize_diagonal")
    LAMBDA_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    PENALIZE_DIAGONAL_FIELD_NUMBER: _ClassVar[int]
    rho: float
    max_iterations: int
    penalize_diagonal: bool
    def __init__(self, rho: _Optional[float] = ..., max_iterations: _Optional[int] = ..., penalize_diagonal: _Optional[bool] = ..., **kwargs) -> None: ...

class GetEstimateRequest(_message.Message):
    __slots__ = ("collection_id", "none", "universal", "ldp_noise", "adaptive", "cross_validated", "spectral", "factor", "bulk_shrink", "skip_psd_projection", "threshold_kind", "psd_floor", "target", "precision", "release", "principal_components", "principal_components_of_correlation", "error_bars")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    UNIVERSAL_FIELD_NUMBER: _ClassVar[int]
    LDP_NOISE_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_FIELD_NUMBER: _ClassVar[int]
    CROSS_VALIDATED_FIELD_NUMBER: _ClassVar[int]
    SPECTRAL_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    BULK_SHRINK_FIELD_NUMBER: _ClassVar[int]
    SKIP_PSD_PROJECTION_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_KIND_FIELD_NUMBER: _ClassVar[int]
    PSD_FLOOR_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_COMPONENTS_OF_CORRELATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_BARS_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    none: NoThreshold
    universal: UniversalThreshold
    ldp_noise: LdpNoiseThreshold
    adaptive: AdaptiveThreshold
    cross_validated: CrossValidatedThreshold
    spectral: SpectralShrinkage
    factor: FactorModel
    bulk_shrink: BulkShrinkage
    skip_psd_projection: bool
    threshold_kind: ThresholdKind
    psd_floor: float
    target: EstimateTarget
    precision: PrecisionParams
    release: CentralRelease
    principal_components: int
    principal_components_of_correlation: bool
    error_bars: bool
    def __init__(self, collection_id: _Optional[str] = ..., none: _Optional[_Union[NoThreshold, _Mapping]] = ..., universal: _Optional[_Union[UniversalThreshold, _Mapping]] = ..., ldp_noise: _Optional[_Union[LdpNoiseThreshold, _Mapping]] = ..., adaptive: _Optional[_Union[AdaptiveThreshold, _Mapping]] = ..., cross_validated: _Optional[_Union[CrossValidatedThreshold, _Mapping]] = ..., spectral: _Optional[_Union[SpectralShrinkage, _Mapping]] = ..., factor: _Optional[_Union[FactorModel, _Mapping]] = ..., bulk_shrink: _Optional[_Union[BulkShrinkage, _Mapping]] = ..., skip_psd_projection: _Optional[bool] = ..., threshold_kind: _Optional[_Union[ThresholdKind, str]] = ..., psd_floor: _Optional[float] = ..., target: _Optional[_Union[EstimateTarget, str]] = ..., precision: _Optional[_Union[PrecisionParams, _Mapping]] = ..., release: _Optional[_Union[CentralRelease, _Mapping]] = ..., principal_components: _Optional[int] = ..., principal_components_of_correlation: _Optional[bool] = ..., error_bars: _Optional[bool] = ...) -> None: ...

class CentralRelease(_message.Message):
    __slots__ = ("mechanism", "rho", "epsilon", "compressed_rows")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_ROWS_FIELD_NUMBER: _ClassVar[int]
    mechanism: CentralMechanism
    rho: float
    epsilon: float
    compressed_rows: int
    def __init__(self, mechanism: _Optional[_Union[CentralMechanism, str]] = ..., rho: _Optional[float] = ..., epsilon: _Optional[float] = ..., compressed_rows: _Optional[int] = ...) -> None: ...

class StoredCentralRelease(_message.Message):
    __slots__ = ("mechanism", "rho", "epsilon", "reports", "noise_sd_grid", "sums", "radius", "trace", "fold_sums", "fold_counts", "off_diagonal_noise_sd_grid")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    NOISE_SD_GRID_FIELD_NUMBER: _ClassVar[int]
    SUMS_FIELD_NUMBER: _ClassVar[int]
    RADIUS_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    FOLD_SUMS_FIELD_NUMBER: _ClassVar[int]
    FOLD_COUNTS_FIELD_NUMBER: _ClassVar[int]
    OFF_DIAGONAL_NOISE_SD_GRID_FIELD_NUMBER: _ClassVar[int]
    mechanism: CentralMechanism
    rho: float
    epsilon: float
    reports: int
    noise_sd_grid: float
    sums: _containers.RepeatedScalarFieldContainer[int]
    radius: float
    trace: float
    fold_sums: _containers.RepeatedScalarFieldContainer[int]
    fold_counts: _containers.RepeatedScalarFieldContainer[int]
    off_diagonal_noise_sd_grid: float
    def __init__(self, mechanism: _Optional[_Union[CentralMechanism, str]] = ..., rho: _Optional[float] = ..., epsilon: _Optional[float] = ..., reports: _Optional[int] = ..., noise_sd_grid: _Optional[float] = ..., sums: _Optional[_Iterable[int]] = ..., radius: _Optional[float] = ..., trace: _Optional[float] = ..., fold_sums: _Optional[_Iterable[int]] = ..., fold_counts: _Optional[_Iterable[int]] = ..., off_diagonal_noise_sd_grid: _Optional[float] = ...) -> None: ...

class Edge(_message.Message):
    __slots__ = ("i", "j")
    I_FIELD_NUMBER: _ClassVar[int]
    J_FIELD_NUMBER: _ClassVar[int]
    i: int
    j: int
    def __init__(self, i: _Optional[int] = ..., j: _Optional[int] = ...) -> None: ...

class Estimate(_message.Message):
    __slots__ = ("collection_id", "dim", "upper_triangle", "reports", "sigma", "entry_noise_sd", "threshold", "threshold_rule", "surviving_entries", "clamped_eigenvalues", "psd_projected", "target", "threshold_kind", "precision_upper_triangle", "precision_lambda", "precision_lambda_cross_validated", "graph", "precision_iterations", "precision_converged", "moments", "mean", "mean_noise_sd", "second_moment", "correlation", "undefined_correlation_variables", "variable_names", "release", "release_rho_spent", "rho_budget", "rho_spent", "release_radius", "release_trace", "shuffle", "shuffle_delivered", "error_bars", "verdict", "principal_components")
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    UPPER_TRIANGLE_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    ENTRY_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_RULE_FIELD_NUMBER: _ClassVar[int]
    SURVIVING_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CLAMPED_EIGENVALUES_FIELD_NUMBER: _ClassVar[int]
    PSD_PROJECTED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_KIND_FIELD_NUMBER: _ClassVar[int]
    PRECISION_UPPER_TRIANGLE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_LAMBDA_FIELD_NUMBER: _ClassVar[int]
    PRECISION_LAMBDA_CROSS_VALIDATED_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    PRECISION_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    PRECISION_CONVERGED_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    MEAN_NOISE_SD_FIELD_NUMBER: _ClassVar[int]
    SECOND_MOMENT_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_CORRELATION_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_NAMES_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_RHO_SPENT_FIELD_NUMBER: _ClassVar[int]
    RHO_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RHO_SPENT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_RADIUS_FIELD_NUMBER: _ClassVar[int]
    RELEASE_TRACE_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ERROR_BARS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    dim: int
    upper_triangle: _containers.RepeatedScalarFieldContainer[float]
    reports: int
    sigma: float
    entry_noise_sd: float
    threshold: float
    threshold_rule: str
    surviving_entries: int
    clamped_eigenvalues: int
    psd_projected: bool
    target: EstimateTarget
    threshold_kind: str
    precision_upper_triangle: _containers.RepeatedScalarFieldContainer[float]
    precision_lambda: float
    precision_lambda_cross_validated: bool
    graph: _containers.RepeatedCompositeFieldContainer[Edge]
    precision_iterations: int
    precision_converged: bool
    moments: Moments
    mean: _containers.RepeatedScalarFieldContainer[float]
    mean_noise_sd: float
    second_moment: _containers.RepeatedScalarFieldContainer[float]
    correlation: _containers.RepeatedScalarFieldContainer[float]
    undefined_correlation_variables: _containers.RepeatedScalarFieldContainer[int]
    variable_names: _containers.RepeatedScalarFieldContainer[str]
    release: CentralRelease
    release_rho_spent: float
    rho_budget: float
    rho_spent: float
    release_radius: float
    release_trace: float
    shuffle: ShuffleParams
    shuffle_delivered: ShuffleDelivered
    error_bars: ErrorBars
    verdict: SignalVerdict
    principal_components: PrincipalComponents
    def __init__(self, collection_id: _Optional[str] = ..., dim: _Optional[int] = ..., upper_triangle: _Optional[_Iterable[float]] = ..., reports: _Optional[int] = ..., sigma: _Optional[float] = ..., entry_noise_sd: _Optional[float] = ..., threshold: _Optional[float] = ..., threshold_rule: _Optional[str] = ..., surviving_entries: _Optional[int] = ..., clamped_eigenvalues: _Optional[int] = ..., psd_projected: _Optional[bool] = ..., target: _Optional[_Union[EstimateTarget, str]] = ..., threshold_kind: _Optional[str] = ..., precision_upper_triangle: _Optional[_Iterable[float]] = ..., precision_lambda: _Optional[float] = ..., precision_lambda_cross_validated: _Optional[bool] = ..., graph: _Optional[_Iterable[_Union[Edge, _Mapping]]] = ..., precision_iterations: _Optional[int] = ..., precision_converged: _Optional[bool] = ..., moments: _Optional[_Union[Moments, str]] = ..., mean: _Optional[_Iterable[float]] = ..., mean_noise_sd: _Optional[float] = ..., second_moment: _Optional[_Iterable[float]] = ..., correlation: _Optional[_Iterable[float]] = ..., undefined_correlation_variables: _Optional[_Iterable[int]] = ..., variable_names: _Optional[_Iterable[str]] = ..., release: _Optional[_Union[CentralRelease, _Mapping]] = ..., release_rho_spent: _Optional[float] = ..., rho_budget: _Optional[float] = ..., rho_spent: _Optional[float] = ..., release_radius: _Optional[float] = ..., release_trace: _Optional[float] = ..., shuffle: _Optional[_Union[ShuffleParams, _Mapping]] = ..., shuffle_delivered: _Optional[_Union[ShuffleDelivered, _Mapping]] = ..., error_bars: _Optional[_Union[ErrorBars, _Mapping]] = ..., verdict: _Optional[_Union[SignalVerdict, _Mapping]] = ..., principal_components: _Optional[_Union[PrincipalComponents, _Mapping]] = ...) -> None: ...

class ErrorBars(_message.Message):
    __slots__ = ("raw_upper_triangle", "standard_errors", "raw_correlation", "correlation_standard_errors", "method")
    RAW_UPPER_TRIANGLE_FIELD_NUMBER: _ClassVar[int]
    STANDARD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    RAW_CORRELATION_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_STANDARD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    raw_upper_triangle: _containers.RepeatedScalarFieldContainer[float]
    standard_errors: _containers.RepeatedScalarFieldContainer[float]
    raw_correlation: _containers.RepeatedScalarFieldContainer[float]
    correlation_standard_errors: _containers.RepeatedScalarFieldContainer[float]
    method: str
    def __init__(self, raw_upper_triangle: _Optional[_Iterable[float]] = ..., standard_errors: _Optional[_Iterable[float]] = ..., raw_correlation: _Optional[_Iterable[float]] = ..., correlation_standard_errors: _Optional[_Iterable[float]] = ..., method: _Optional[str] = ...) -> None: ...

class SignalVerdict(_message.Message):
    __slots__ = ("sufficient", "noise_to_signal", "off_diagonal_signal_z", "top_eigenvalue_z", "reports_needed", "target_noise_to_signal", "summary", "state", "noise_to_signal_low", "noise_to_signal_high", "reports_needed_low", "reports_needed_high", "release_is_zero")
    SUFFICIENT_FIELD_NUMBER: _ClassVar[int]
    NOISE_TO_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    OFF_DIAGONAL_SIGNAL_Z_FIELD_NUMBER: _ClassVar[int]
    TOP_EIGENVALUE_Z_FIELD_NUMBER: _ClassVar[int]
    REPORTS_NEEDED_FIELD_NUMBER: _ClassVar[int]
    TARGET_NOISE_TO_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NOISE_TO_SIGNAL_LOW_FIELD_NUMBER: _ClassVar[int]
    NOISE_TO_SIGNAL_HIGH_FIELD_NUMBER: _ClassVar[int]
    REPORTS_NEEDED_LOW_FIELD_NUMBER: _ClassVar[int]
    REPORTS_NEEDED_HIGH_FIELD_NUMBER: _ClassVar[int]
    RELEASE_IS_ZERO_FIELD_NUMBER: _ClassVar[int]
    sufficient: bool
    noise_to_signal: float
    off_diagonal_signal_z: float
    top_eigenvalue_z: float
    reports_needed: int
    target_noise_to_signal: float
    summary: str
    state: VerdictState
    noise_to_signal_low: float
    noise_to_signal_high: float
    reports_needed_low: int
    reports_needed_high: int
    release_is_zero: bool
    def __init__(self, sufficient: _Optional[bool] = ..., noise_to_signal: _Optional[float] = ..., off_diagonal_signal_z: _Optional[float] = ..., top_eigenvalue_z: _Optional[float] = ..., reports_needed: _Optional[int] = ..., target_noise_to_signal: _Optional[float] = ..., summary: _Optional[str] = ..., state: _Optional[_Union[VerdictState, str]] = ..., noise_to_signal_low: _Optional[float] = ..., noise_to_signal_high: _Optional[float] = ..., reports_needed_low: _Optional[int] = ..., reports_needed_high: _Optional[int] = ..., release_is_zero: _Optional[bool] = ...) -> None: ...

class PrincipalComponent(_message.Message):
    __slots__ = ("eigenvalue", "explained_variance_ratio", "loadings", "above_noise_edge", "raw_eigenvalue")
    EIGENVALUE_FIELD_NUMBER: _ClassVar[int]
    EXPLAINED_VARIANCE_RATIO_FIELD_NUMBER: _ClassVar[int]
    LOADINGS_FIELD_NUMBER: _ClassVar[int]
    ABOVE_NOISE_EDGE_FIELD_NUMBER: _ClassVar[int]
    RAW_EIGENVALUE_FIELD_NUMBER: _ClassVar[int]
    eigenvalue: float
    explained_variance_ratio: float
    loadings: _containers.RepeatedScalarFieldContainer[float]
    above_noise_edge: bool
    raw_eigenvalue: float
    def __init__(self, eigenvalue: _Optional[float] = ..., explained_variance_ratio: _Optional[float] = ..., loadings: _Optional[_Iterable[float]] = ..., above_noise_edge: _Optional[bool] = ..., raw_eigenvalue: _Optional[float] = ...) -> None: ...

class PrincipalComponents(_message.Message):
    __slots__ = ("of_correlation", "total_variance", "noise_edge", "components")
    OF_CORRELATION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    NOISE_EDGE_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    of_correlation: bool
    total_variance: float
    noise_edge: float
    components: _containers.RepeatedCompositeFieldContainer[PrincipalComponent]
    def __init__(self, of_correlation: _Optional[bool] = ..., total_variance: _Optional[float] = ..., noise_edge: _Optional[float] = ..., components: _Optional[_Iterable[_Union[PrincipalComponent, _Mapping]]] = ...) -> None: ...

class CloseCollectionRequest(_message.Message):
    __slots__ = ("collection_id",)
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    def __init__(self, collection_id: _Optional[str] = ...) -> None: ...

class DeleteCollectionRequest(_message.Message):
    __slots__ = ("collection_id",)
    COLLECTION_ID_FIELD_NUMBER: _ClassVar[int]
    collection_id: str
    def __init__(self, collection_id: _Optional[str] = ...) -> None: ...

class DeleteCollectionResponse(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: int
    def __init__(self, reports: _Optional[int] = ...) -> None: ...
