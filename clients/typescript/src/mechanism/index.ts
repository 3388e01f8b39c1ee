/**
 * The report mechanisms, one module each (`client/src/mechanism/`): a collection holds
 * one {@link Mechanism} and asks it for its derived parameters and the device half of
 * a report; nothing else switches on which mechanism it is.
 */

import type { GaussianMechanism } from "./gaussian.js";
import type { RankOneMechanism } from "./rank_one.js";
import type { RawVectorMechanism } from "./raw_vector.js";

export type { ReportMechanism } from "./types.js";
export { GaussianMechanism, type GaussianParams, roundGrid } from "./gaussian.js";
export { liftedInput, RankOneMechanism } from "./rank_one.js";
export { rawVector, RawVectorMechanism } from "./raw_vector.js";
export { encodeClamped } from "./encoding.js";

/** A collection's mechanism: discriminated by `kind`. */
export type Mechanism = GaussianMechanism | RankOneMechanism | RawVectorMechanism;
