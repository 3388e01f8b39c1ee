// Shared helpers of the tests: the vector file and its f64 and hex fields.

import { readFileSync } from "node:fs";
import { fromBinary } from "@bufbuild/protobuf";
import { CollectionParamsSchema } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import { Collection, DiscreteGaussianSampler, type NoiseSampler, Perturber, trustedCuratorReport } from "../src/index.js";
import { f64FromBits } from "../src/libm.js";

export interface F64 {
  bits: string;
  value: number;
}
export interface VectorCase {
  name: string;
  params_hex: string;
  derived: Record<string, unknown> & { sigma_grid?: F64; rank_one?: Record<string, unknown> };
  seed: string;
  reports: {
    x: F64[];
    clipped_u: F64[];
    statistic: string[];
    report_id: string;
    payload: string;
    report_message: string;
  }[];
}

export const VECTORS_PATH = new URL("../../../../testing/vectors/reports-v1.json", import.meta.url);
export const vectors = JSON.parse(readFileSync(VECTORS_PATH, "utf8")) as { format: string; version: number; cases: VectorCase[] };

export const f64 = (v: F64): number => f64FromBits(BigInt(`0x${v.bits}`));
export const bitsOf = (x: number): string => {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  return view.getBigUint64(0).toString(16).padStart(16, "0");
};
export const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
export const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "hex"));
export const collectionOf = (c: VectorCase): Collection => Collection.fromParams(fromBinary(CollectionParamsSchema, unhex(c.params_hex)));

/** The payloads of a case from a fresh sampler with its seed (optionally a doctored collection). */
export function payloads(
  c: VectorCase,
  collection = collectionOf(c),
  noise: NoiseSampler = DiscreteGaussianSampler.fromSeedForSimulation(BigInt(c.seed)),
): string[] {
  const perturber = new Perturber(collection);
  return c.reports.map((r) => {
    const x = r.x.map(f64);
    const report = collection.isCentral ? trustedCuratorReport(collection, x, unhex(r.report_id)) : perturber.report(x, noise, unhex(r.report_id));
    return hex(report.payload);
  });
}
