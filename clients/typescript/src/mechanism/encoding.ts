/** Writing a report's values on the wire (`encode_clamped`), shared by every mechanism. */

import { Encoding } from "../gen/ldpcov/v1/ldpcov_pb.js";

export const I64_MAX = (1n << 63n) - 1n;
export const I64_MIN = -(1n << 63n);
export const I32_MAX = 2147483647n;

export function clampBig(v: bigint, lo: bigint, hi: bigint): bigint {
  return v < lo ? lo : v > hi ? hi : v;
}

/** Writes `values` in `encoding`, each clamped to `±max` (`encode_clamped`). */
export function encodeClamped(encoding: Encoding, max: bigint, values: readonly bigint[]): Uint8Array {
  const m = clampBig(max, 0n, I32_MAX);
  const width = encoding === Encoding.I16_LE ? 2 : encoding === Encoding.I8 ? 1 : 4;
  const out = new Uint8Array(values.length * width);
  const view = new DataView(out.buffer);
  values.forEach((value, i) => {
    const v = Number(clampBig(value, -m, m));
    if (width === 4) view.setInt32(4 * i, v, true);
    else if (width === 2) view.setInt16(2 * i, v, true);
    else view.setInt8(i, v);
  });
  return out;
}
