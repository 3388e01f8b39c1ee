/**
 * The parameter derivation of `ldpcov-proto`, mirrored in the same f64 operations:
 * the analytic Gaussian calibration (`calibration.rs`), the Gaussian report's grid and
 * bounds (`mechanism/gaussian.rs`) and the rank-one parameters
 * (`mechanism/rank_one/mod.rs`). `exp` and `erfc` are the bit-exact ports of `libm.ts`.
 */

import { erfc, exp, roundHalfAway, scalbn } from "./libm.js";

/** Φ(x), via erfc. */
export function stdNormalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** Balle & Wang's exact δ(σ) of the Gaussian mechanism. */
export function gaussianDelta(sensitivity: number, epsilon: number, sigma: number): number {
  const a = sensitivity / (2 * sigma);
  const b = (epsilon * sigma) / sensitivity;
  return Math.max(stdNormalCdf(a - b) - exp(epsilon) * stdNormalCdf(-a - b), 0);
}

/** The analytic Gaussian mechanism: the smallest σ with δ(σ) ≤ δ, by bisection. */
export function analyticSigma(sensitivity: number, epsilon: number, delta: number): number {
  if (!(Number.isFinite(epsilon) && epsilon > 0)) throw new RangeError(`epsilon ${epsilon}`);
  if (!(delta > 0 && delta < 1)) throw new RangeError(`delta ${delta}`);
  if (!(Number.isFinite(sensitivity) && sensitivity > 0)) throw new RangeError(`sensitivity ${sensitivity}`);
  let hi = sensitivity;
  while (gaussianDelta(sensitivity, epsilon, hi) > delta) {
    hi *= 2;
    if (!Number.isFinite(hi)) throw new RangeError(`(ε = ${epsilon}, δ = ${delta}) cannot be calibrated`);
  }
  let lo = hi / 2;
  const minPositive = 2.2250738585072014e-308;
  while (lo > minPositive && gaussianDelta(sensitivity, epsilon, lo) <= delta) lo /= 2;
  for (let i = 0; i < 200; i++) {
    const mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (gaussianDelta(sensitivity, epsilon, mid) > delta) lo = mid;
    else hi = mid;
  }
  return hi;
}

// ---- the rank-one parameters ----

export const LATTICE_BITS = 40;
export const INPUT_BITS = 40;
export const GAMMA_BITS = 16;
export const WIRE_STEP_BITS = 11;
/**
 * The largest ε of a rank-one collection (`MAX_RANK_ONE_EPSILON`): the mixture sampler's
 * cost hardly grows with ε; beyond 16 the lattice slack and the i16 wire clamp's margin
 * are the limit.
 */
export const MAX_RANK_ONE_EPSILON = 16;
const SQRT_2PI = 2.5066282746310007;
const SLACK_MARGIN = 1e-6;
const ETA_MARGIN = 1e-15;
const NOMINAL_EPSILON_BITS = 40;
const GAMMA_SEARCH_STEPS = 96;
/** Absolute margin of the privacy-loss bound for its f64 evaluation (`LOSS_MARGIN`). */
const LOSS_MARGIN = 1e-13;
/** Relative amount `p*` is lowered by before it is rounded down to `2^−64` (`CAP_PROBABILITY_MARGIN`). */
const CAP_PROBABILITY_MARGIN = 1e-12;
/** The largest `P`: `2^64 − 2^11`. */
const MAX_CAP_PROBABILITY_UNITS = (1n << 64n) - (1n << 11n);

export type Cap = "symmetric" | "one_sided";

function sides(cap: Cap): number {
  return cap === "symmetric" ? 2 : 1;
}

function normalDensity(x: number): number {
  return exp(-0.5 * x * x) / SQRT_2PI;
}

/** The law of `t = ⟨y, ũ⟩` (`CapMoments`). */
export interface CapMoments {
  capMass: number;
  acceptance: number;
  kappa: number;
  meanScale: number;
  excessFourthMoment: number;
}

export function capMoments(gamma: number, epsilon: number, cap: Cap): CapMoments {
  const r = exp(-epsilon);
  const s = sides(cap);
  const dens = normalDensity(gamma);
  const tail = stdNormalCdf(-gamma);
  const capMass = s * tail;
  const a2 = s * (gamma * dens + tail);
  const a4 = s * ((gamma * gamma * gamma + 3 * gamma) * dens + 3 * tail);
  const a1 = cap === "symmetric" ? 0 : dens;
  const z = capMass + r * (1 - capMass);
  const m2 = (a2 + r * (1 - a2)) / z;
  const m4 = (a4 + r * (3 - a4)) / z;
  return {
    capMass,
    acceptance: z,
    kappa: (s * gamma * dens * (1 - r)) / z,
    meanScale: ((1 - r) * a1) / z,
    excessFourthMoment: m4 - 3 * m2 * m2,
  };
}

function worstCaseTotalVariance(m: CapMoments, dim: number, cap: Cap): number {
  const p = dim;
  const k = m.kappa;
  let a = (p * (p + 1)) / (k * k);
  let b = (2 * (p + 1)) / k;
  const c2 = 2 + m.excessFourthMoment / (k * k);
  if (cap === "one_sided") {
    const c = m.meanScale;
    a += p / (c * c);
    b += (k - c * c) / (c * c);
  }
  const f = (s: number) => a + b * s + c2 * s * s;
  let worst = Math.max(f(0), f(1));
  if (c2 < 0) {
    const vertex = -b / (2 * c2);
    if (vertex > 0 && vertex < 1) worst = Math.max(worst, f(vertex));
  }
  return worst;
}

function goldenSectionMinimum(objective: (g: number) => number): number {
  const invPhi = 0.6180339887498948;
  let lo = 0.05;
  let hi = 8.0;
  let x1 = hi - invPhi * (hi - lo);
  let x2 = lo + invPhi * (hi - lo);
  let f1 = objective(x1);
  let f2 = objective(x2);
  for (let i = 0; i < GAMMA_SEARCH_STEPS; i++) {
    if (f1 <= f2) {
      hi = x2;
      [x2, f2] = [x1, f1];
      x1 = hi - invPhi * (hi - lo);
      f1 = objective(x1);
    } else {
      lo = x1;
      [x1, f1] = [x2, f2];
      x2 = lo + invPhi * (hi - lo);
      f2 = objective(x2);
    }
  }
  return 0.5 * (lo + hi);
}

function capMassDeviationBound(dim: number, cap: Cap): number {
  const h = scalbn(1, -LATTICE_BITS);
  const coords = dim + 1;
  const rhoMin = Math.sqrt(1 - scalbn(1, 1 - INPUT_BITS));
  const lattice = coords * h * normalDensity(0);
  const norm = (normalDensity(1) * (1 - rhoMin)) / rhoMin;
  return sides(cap) * (lattice + norm) * (1 + SLACK_MARGIN) + ETA_MARGIN;
}

/**
 * `ln[q/(q − η)] + ln[(1 − q + η)/(1 − q)]`, inflated by a relative margin
 * (`lattice_slack`): what the lattice adds to `ε_n` in the worst ratio. Independent of ε.
 */
function latticeSlack(capMass: number, eta: number): number {
  const q = capMass;
  return (Math.log1p(eta / (q - eta)) + Math.log1p(eta / (1 - q))) * (1 + SLACK_MARGIN);
}

/**
 * The ε the mixture's weight is set for (`nominal_epsilon`): `ε − slack(q, η)`, lowered
 * by `2^−40` and rounded down to a multiple of `2^−40`.
 */
export function nominalEpsilon(epsilon: number, capMass: number, eta: number): number {
  const nominal = epsilon - latticeSlack(capMass, eta);
  return scalbn(Math.floor(scalbn(nominal, NOMINAL_EPSILON_BITS)) - 1, -NOMINAL_EPSILON_BITS);
}

/**
 * `P = p̂·2^64`, the cap component's weight in units of `2^−64` (`cap_probability_units`):
 * `p* = q/(q + r(1 − q))`, `r = e^{−ε_n}`, lowered by a relative `10⁻¹²` and rounded
 * down; at least 1 and at most `2^64 − 2^11`. The same f64 operations as Rust (`exp` is
 * the bit-exact port), so the same integer.
 */
export function capProbabilityUnits(nominal: number, capMass: number): bigint {
  const q = capMass;
  const r = exp(-nominal);
  const p = (q / (q + r * (1 - q))) * (1 - CAP_PROBABILITY_MARGIN);
  // An f64 below 1 times 2^64, floored: an integer-valued f64, converted exactly (Rust's
  // `as u64` saturates; so does the clamp below).
  const scaled = Math.floor(scalbn(p, 64));
  const units = Number.isFinite(scaled) && scaled > 0 ? BigInt(scaled) : 0n;
  return units < 1n ? 1n : units > MAX_CAP_PROBABILITY_UNITS ? MAX_CAP_PROBABILITY_UNITS : units;
}

/**
 * The privacy loss of the mixture with cap weight `p̂` for a cap mass within `q ± η`
 * (`privacy_loss_bound`): the largest of its four log-ratios, with margins. Only
 * reported (the client never decides anything on it); `Math.log`/`Math.log1p` are
 * fdlibm's, as Rust's `libm`.
 */
export function privacyLossBound(capProbability: number, capMass: number, eta: number): number {
  const q = capMass;
  const p = capProbability;
  const m = 1 + SLACK_MARGIN;
  const logTheta = Math.log(p) - Math.log1p(-p);
  const logOddsOff = Math.log1p(-q) - Math.log(q);
  const inOut = logTheta + logOddsOff + latticeSlack(q, eta);
  const outIn = -logTheta - logOddsOff + (Math.log1p(eta / q) + Math.log1p(eta / (1 - q - eta))) * m;
  const bothIn = Math.log1p((2 * eta) / (q - eta)) * m;
  const bothOut = Math.log1p((2 * eta) / (1 - q - eta)) * m;
  return Math.max(inOut, outIn, bothIn, bothOut) + LOSS_MARGIN;
}

/** The derived parameters of a rank-one collection (`RankOneParams`). */
export interface RankOneParams {
  dim: number;
  epsilon: number;
  cap: Cap;
  gammaUnits: bigint;
  gamma: number;
  /** The ε the mixture's weight is set for. */
  nominalEpsilon: number;
  /** `P = p̂·2^64`: the sampler keeps its cap component with probability exactly `p̂`. */
  capProbabilityUnits: bigint;
  /** `p̂ = P·2^−64` (exact in f64). */
  capProbability: number;
  /** The tilt λ of the cap component's proposal: γ rounded (ties away), at least 1. */
  tilt: number;
  eta: number;
  /** {@link privacyLossBound} of `p̂`: at most `epsilon`. */
  privacyLossBound: number;
  moments: CapMoments;
}

export function rankOneParams(dim: number, epsilon: number, cap: Cap): RankOneParams {
  if (!(epsilon > 0 && epsilon <= MAX_RANK_ONE_EPSILON)) throw new RangeError(`rank-one epsilon ${epsilon}`);
  const optimal = goldenSectionMinimum((g) => worstCaseTotalVariance(capMoments(g, epsilon, cap), dim, cap));
  // libm::round: ties away from zero (the value is positive).
  const scaled = scalbn(optimal, GAMMA_BITS);
  const gammaUnits = BigInt(Math.floor(scaled) + (scaled - Math.floor(scaled) >= 0.5 ? 1 : 0));
  const gamma = scalbn(Number(gammaUnits), -GAMMA_BITS);
  const eta = capMassDeviationBound(dim, cap);
  const q = capMoments(gamma, epsilon, cap).capMass;
  const nominal = nominalEpsilon(epsilon, q, eta);
  const units = capProbabilityUnits(nominal, q);
  const capProbability = scalbn(Number(units), -64);
  return {
    dim,
    epsilon,
    cap,
    gammaUnits,
    gamma,
    nominalEpsilon: nominal,
    capProbabilityUnits: units,
    capProbability,
    tilt: Math.max(roundHalfAway(gamma), 1),
    eta,
    privacyLossBound: privacyLossBound(capProbability, q, eta),
    moments: capMoments(gamma, nominal, cap),
  };
}

/** `A = e^{λγ − λ²ρ²/2}·q₊`, the cap component's acceptance (`cap_acceptance`). */
function capAcceptance(p: RankOneParams, capMass: number, rho2: number): number {
  const l = p.tilt;
  return (exp(l * p.gamma - 0.5 * l * l * rho2) * capMass) / sides(p.cap);
}

/**
 * Expected rounds of the off-cap component, `1/(1 − q)`, and of the cap component,
 * `1/A` (`RankOneParams::expected_rounds`), for an input of norm 1.
 */
export function rankOneExpectedRounds(p: RankOneParams): [number, number] {
  const q = p.moments.capMass;
  return [1 / (1 - q), 1 / capAcceptance(p, q, 1)];
}

/** Expected rounds per report, both components together (`expected_iterations`: the wire's `expected_rounds`). */
export function rankOneExpectedIterations(p: RankOneParams): number {
  const [off, on] = rankOneExpectedRounds(p);
  return off + on;
}

// ---- zCDP accounting (`calibration.rs`), for the device's budget ledger ----

/** ρ of the Gaussian mechanism: `Δ²/(2σ²)` (`zcdp_rho`). */
export function zcdpRho(sensitivity: number, sigma: number): number {
  return (sensitivity * sensitivity) / (2 * sigma * sigma);
}

/** ρ of a pure ε-DP release: `ε²/2` (`pure_dp_rho`). */
export function pureDpRho(epsilon: number): number {
  return (epsilon * epsilon) / 2;
}

/** The ε at which ρ-zCDP implies (ε, δ)-DP: `ρ + 2√(ρ·ln(1/δ))` (`zcdp_epsilon`). */
export function zcdpEpsilon(rho: number, delta: number): number {
  return rho + 2 * Math.sqrt(rho * Math.log(1 / delta));
}

/** The largest ρ whose `zcdpEpsilon` at δ is at most ε: `(√(ln(1/δ) + ε) − √(ln(1/δ)))²` (`zcdp_rho_for_epsilon`). */
export function zcdpRhoForEpsilon(epsilon: number, delta: number): number {
  const l = Math.log(1 / delta);
  const r = Math.sqrt(l + epsilon) - Math.sqrt(l);
  return r * r;
}
