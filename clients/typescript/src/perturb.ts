/**
 * The device core (`ldpcov_client::Perturber`): subtract the centre, clip, then the
 * collection's mechanism (`src/mechanism/`) builds the payload — the Gaussian report's
 * noisy statistic, a rank-one lattice draw, or, for a central collection's trusted
 * curator, the raw vector.
 */

import { create, toBinary } from "@bufbuild/protobuf";
import { Collection, type GaussianParams } from "./collection.js";
import { Encoding, type Report, ReportSchema } from "./gen/ldpcov/v1/ldpcov_pb.js";
import { InputError } from "./limits.js";
import { GaussianMechanism, RawVectorMechanism } from "./mechanism/index.js";
import type { NoiseSampler } from "./noise.js";

export { InputError } from "./limits.js";
export { encodeClamped, liftedInput, rawVector, roundGrid } from "./mechanism/index.js";

/** `u = (1 − 2⁻³²)·y / max(R, ‖y‖)`: the clip's relative safety margin. */
export const CLIP_MARGIN = 1 / 4294967296;
export const REPORT_ID_LEN = 16;

/** The unit-ball vector a report is built from (`Perturber::clip`). */
export function clip(collection: Collection, x: readonly number[]): number[] {
  if (x.length !== collection.dim) throw new InputError(`vector has ${x.length} coordinates, the collection expects ${collection.dim}`);
  let index = x.findIndex((v) => !Number.isFinite(v));
  if (index >= 0) throw new InputError(`coordinate ${index} is not a finite number`);
  let y: readonly number[] = x;
  if (collection.centre.length > 0) {
    y = x.map((v, i) => v - collection.centre[i]!);
    index = y.findIndex((v) => !Number.isFinite(v));
    if (index >= 0) throw new InputError(`coordinate ${index} is not a finite number after subtracting the centre`);
  }
  const maxAbs = y.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  if (maxAbs === 0) return new Array<number>(y.length).fill(0);
  let sum = 0;
  for (const v of y) {
    const t = v / maxAbs;
    sum += t * t;
  }
  const s = Math.sqrt(sum);
  const keep = 1 - CLIP_MARGIN;
  const radius = collection.clipRadius;
  if (maxAbs * s <= radius) return y.map((v) => (v / radius) * keep);
  return y.map((v) => (v / maxAbs / s) * keep);
}

/**
 * The Gaussian report's exact noiseless statistic on the grid (`GaussianReport::statistic`)
 * of `collection`, whose mechanism `g` is.
 */
export function gaussianStatistic(collection: Collection, g: GaussianParams, u: readonly number[]): bigint[] {
  const m = g instanceof GaussianMechanism ? g : collection.mechanism;
  if (!(m instanceof GaussianMechanism)) throw new InputError(`collection ${collection.id} has no Gaussian report`);
  return m.statistic(u);
}

/** The report payload of the clipped `u` (noise, wire step, encoding): the mechanism's device half. */
export function payloadOfClipped(collection: Collection, u: readonly number[], noise: NoiseSampler): Uint8Array {
  const payload = collection.mechanism.devicePayload(u, noise);
  if (payload === undefined) throw new InputError(`collection ${collection.id} is central: use trustedCuratorReport`);
  return payload;
}

/** Turns a user's vector into the perturbed report of one collection (`Perturber`). */
export class Perturber {
  constructor(readonly collection: Collection) {}

  clip(x: readonly number[]): number[] {
    return clip(this.collection, x);
  }

  /** A complete report for `x`, tagged with `reportId` (reuse both when resending). */
  report(x: readonly number[], noise: NoiseSampler, reportId: Uint8Array): Report {
    if (reportId.length !== REPORT_ID_LEN) throw new InputError(`report id has ${reportId.length} bytes, expected 16`);
    return reportOfClipped(this.collection, this.clip(x), noise, reportId);
  }
}

/** The complete report of the clipped `u` (`report_of_clipped`), tagged with `reportId`. */
export function reportOfClipped(collection: Collection, u: readonly number[], noise: NoiseSampler, reportId: Uint8Array): Report {
  if (reportId.length !== REPORT_ID_LEN) throw new InputError(`report id has ${reportId.length} bytes, expected 16`);
  return create(ReportSchema, {
    collectionId: collection.id,
    reportId: Uint8Array.from(reportId),
    encoding: collection.encoding,
    payload: payloadOfClipped(collection, u, noise),
  });
}

/** A **trusted-curator** report for a central collection: the clipped `x` on the grid `2^−15`, without noise. */
export function trustedCuratorReport(collection: Collection, x: readonly number[], reportId: Uint8Array): Report {
  const m = collection.mechanism;
  if (!(m instanceof RawVectorMechanism)) throw new InputError(`collection ${collection.id} is local: perturb its reports`);
  const u = clip(collection, x);
  return create(ReportSchema, {
    collectionId: collection.id,
    reportId: Uint8Array.from(reportId),
    encoding: Encoding.RAW_I32_LE,
    payload: m.trustedCuratorPayload(u),
  });
}

/** A report as protobuf bytes. */
export function encodeReport(report: Report): Uint8Array {
  return toBinary(ReportSchema, report);
}

/** A fresh random report id (16 bytes of `crypto.getRandomValues`). */
export function randomReportId(): Uint8Array {
  const id = new Uint8Array(REPORT_ID_LEN);
  globalThis.crypto.getRandomValues(id);
  return id;
}
