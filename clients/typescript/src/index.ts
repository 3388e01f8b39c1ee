/**
 * `@ldpcov/client`: the ldpcov device client for browsers and Node. Reports are built
 * exactly as the Rust client builds them (checked byte for byte against the shared test
 * vectors), with the exact discrete Gaussian on integers and ChaCha20 seeded from
 * `crypto.getRandomValues`.
 */

export { Collection, SpecError, type Mechanism, type GaussianParams } from "./collection.js";
export {
  Perturber,
  InputError,
  clip,
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
export { analyticSigma, gaussianDelta, rankOneParams, type RankOneParams } from "./calibration.js";
export * as pb from "./gen/ldpcov/v1/ldpcov_pb.js";
