// Every case of the shared test vectors (testing/vectors/reports-v1.json, written by the
// Rust client) reproduced byte for byte, and every derived parameter equal to the bit.

import assert from "node:assert/strict";
import { test } from "node:test";
import { DiscreteGaussianSampler, Perturber, encodeReport, trustedCuratorReport } from "../src/index.js";
import { gaussianStatistic, liftedInput, rawVector } from "../src/perturb.js";
import { type F64, bitsOf, collectionOf, f64, hex, payloads, unhex, vectors } from "./helpers.js";

test("the vector file is version 1 and covers every mechanism and encoding", () => {
  assert.equal(vectors.format, "ldpcov-report-vectors");
  assert.equal(vectors.version, 1);
  const kinds = new Set(vectors.cases.map((c) => `${c.derived["mechanism"]}`));
  assert.deepEqual([...kinds].sort(), ["gaussian", "rank_one", "raw_vector"]);
});

for (const c of vectors.cases) {
  test(`derived parameters: ${c.name}`, () => {
    const col = collectionOf(c);
    const d = c.derived;
    assert.equal(col.entries, d["entries"]);
    assert.equal(col.gridBits, d["grid_bits"]);
    assert.equal(bitsOf(col.sensitivity), (d["sensitivity"] as F64).bits, "sensitivity");
    assert.equal(bitsOf(col.baseSensitivity), (d["base_sensitivity"] as F64).bits, "base sensitivity");
    assert.equal(bitsOf(col.sigma), (d["sigma"] as F64).bits, "sigma");
    assert.equal(bitsOf(col.rho), (d["rho"] as F64).bits, "rho (the ledger's spend)");
    assert.equal(col.maxAbsGridValue.toString(), d["max_abs_grid_value"]);
    assert.equal(col.wireStep.toString(), d["wire_step"]);
    assert.equal(col.wireMax.toString(), d["wire_max"]);
    assert.equal(col.meanEntries, d["mean_entries"]);
    if (d.sigma_grid !== undefined) assert.equal(bitsOf(col.sigmaGrid), d.sigma_grid.bits, "sigma_grid");
    if (d.rank_one !== undefined) {
      assert.equal(col.mechanism.kind, "rank_one");
      if (col.mechanism.kind !== "rank_one") return;
      const p = col.mechanism.params;
      const r = d.rank_one;
      assert.equal(p.gammaUnits.toString(), r["gamma_units"]);
      assert.equal(bitsOf(p.gamma), (r["gamma"] as F64).bits, "gamma");
      assert.equal(bitsOf(p.nominalEpsilon), (r["nominal_epsilon"] as F64).bits, "nominal epsilon");
      assert.equal(p.capProbabilityUnits.toString(), r["cap_probability_units"], "cap probability units");
      assert.equal(p.tilt, r["tilt"], "tilt");
      assert.equal(bitsOf(p.moments.capMass), (r["cap_mass"] as F64).bits, "cap mass");
      assert.equal(bitsOf(p.moments.meanScale), (r["mean_scale"] as F64).bits, "mean scale");
      assert.equal(bitsOf(p.eta), (r["eta"] as F64).bits, "eta");
      assert.equal(bitsOf(p.moments.kappa), (r["kappa"] as F64).bits, "kappa");
    }
  });

  test(`clip and statistic: ${c.name}`, () => {
    const col = collectionOf(c);
    const perturber = new Perturber(col);
    for (const r of c.reports) {
      const u = perturber.clip(r.x.map(f64));
      assert.deepEqual(u.map(bitsOf), r.clipped_u.map((v) => v.bits));
      const m = col.mechanism;
      const stat = m.kind === "gaussian" ? gaussianStatistic(col, m, u) : m.kind === "rank_one" ? liftedInput(u) : rawVector(u);
      assert.deepEqual(stat.map(String), r.statistic);
    }
  });

  test(`report bytes: ${c.name}`, () => {
    const col = collectionOf(c);
    assert.deepEqual(payloads(c, col), c.reports.map((r) => r.payload));
    // The whole Report message, protobuf-encoded, too.
    const noise = DiscreteGaussianSampler.fromSeedForSimulation(BigInt(c.seed));
    const perturber = new Perturber(col);
    for (const r of c.reports) {
      const x = r.x.map(f64);
      const report = col.isCentral ? trustedCuratorReport(col, x, unhex(r.report_id)) : perturber.report(x, noise, unhex(r.report_id));
      assert.equal(hex(encodeReport(report)), r.report_message);
    }
  });
}
