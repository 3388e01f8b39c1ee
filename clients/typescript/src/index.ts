/**
 * `@ldpcov/client`: the ldpcov device client for browsers and Node. Reports are built
 * exactly as the Rust client builds them (checked byte for byte against the shared test
 * vectors), with the exact discrete Gaussian on integers and ChaCha20 seeded from
 * `crypto.getRandomValues`, and sent over gRPC-Web with retries under the same report id.
 */

export {
  Collection,
  SpecError,
  MAX_MIN_BATCH_SIZE,
  type Mechanism,
  type GaussianParams,
  type ShuffleSettings,
  type ShuffledPrivacy,
} from "./collection.js";
export {
  Perturber,
  InputError,
  clip,
  reportOfClipped,
  trustedCuratorReport,
  encodeReport,
  randomReportId,
  CLIP_MARGIN,
  REPORT_ID_LEN,
} from "./perturb.js";
export {
  DiscreteGaussian,
  DiscreteGaussianSampler,
  RandomBits,
  Sigma2,
  SigmaError,
  type NoiseSampler,
} from "./noise.js";
export { ChaCha20Rng, seedFromU64, type WordSource } from "./rng.js";
export {
  analyticSigma,
  gaussianDelta,
  capProbabilityUnits,
  MAX_RANK_ONE_EPSILON,
  nominalEpsilon,
  privacyLossBound,
  rankOneExpectedIterations,
  rankOneExpectedRounds,
  rankOneParams,
  zcdpEpsilon,
  zcdpRho,
  zcdpRhoForEpsilon,
  pureDpRho,
  type RankOneParams,
} from "./calibration.js";
export { ReportBuilder, requireShuffled, type ReportBuilderOptions } from "./report_builder.js";
export {
  checkPolicy,
  checkShufflePolicy,
  DEFAULT_PRIVACY_POLICY,
  PolicyViolationError,
  ShufflePolicyViolationError,
  type PrivacyPolicy,
  type ShufflePolicy,
} from "./policy.js";
export { AmplificationError, variationRatioDelta, variationRatioEpsilon } from "./accounting/variationRatio.js";
export { fmt21Delta, fmt21Epsilon, shuffledEpsilon } from "./accounting/amplification.js";
export {
  BudgetLedger,
  BudgetExceededError,
  DEFAULT_BUDGET_LIMITS,
  IndexedDbLedgerStorage,
  InvalidBudgetError,
  LEDGER_FILE,
  LedgerCorruptError,
  LedgerError,
  LedgerStorageError,
  MemoryLedgerStorage,
  type BudgetLimits,
  type LedgerStorage,
  type Spend,
} from "./ledger.js";
export {
  AggregatorClient,
  CentralCollectionError,
  CollectionMismatchError,
  RelayMismatchError,
  DEFAULT_RETRY_POLICY,
  InvalidTokenError,
  isRetryable,
  NO_RETRIES,
  StatusError,
  type AggregatorClientOptions,
  type PreparedRelayReport,
  type RelayOptions,
  type RetryPolicy,
  type SubmitOutcome,
} from "./client.js";
export {
  AAD_LABEL,
  AEAD_ID,
  activeKey,
  cipherSuite,
  HPKE_INFO,
  KDF_ID,
  KEM_ID,
  PUBLIC_KEY_LEN,
  RELAY_AAD_LABEL,
  RELAY_HPKE_INFO,
  relayAad,
  relayKey,
  sealAad,
  sealBytes,
  sealBytesForRelay,
  sealForRelay,
  sealForRelayWithIkmForTestVectorsNotPrivate,
  SealingError,
  sealReport,
  sealReportWithIkmForTestVectorsNotPrivate,
  sealWithIkmForTestVectorsNotPrivate,
  SUBMISSION_ID_LEN,
  type ActiveKey,
  type Sealed,
} from "./seal.js";
export * as pb from "./gen/ldpcov/v1/ldpcov_pb.js";
