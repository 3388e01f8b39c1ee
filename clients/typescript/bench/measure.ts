// The time to build one report (clip, noise, encoding: `Perturber.report` with the
// sampler seeded from crypto.getRandomValues), self-contained so that the same function
// runs in Node and, as source text, in the browser page.

export interface MeasureConfig {
  /** Each mechanism at `epsilon` (default 1) and its own `dims` (default `dims`). */
  mechanisms: { name: string; localMechanism: number; encoding: number; delta: number; epsilon?: number; dims?: number[] }[];
  dims: number[];
  /** Time spent per (mechanism, p), at least one report. */
  budgetMs: number;
  maxReports: number;
}

export interface Measurement {
  mechanism: string;
  epsilon: number;
  p: number;
  reports: number;
  ms_per_report: number;
  payload_bytes: number;
}

export async function measure(m: any, config: MeasureConfig): Promise<Measurement[]> {
  const out: Measurement[] = [];
  const now = () => globalThis.performance.now();
  for (const mech of config.mechanisms) {
    const epsilon = mech.epsilon ?? 1;
    for (const p of mech.dims ?? config.dims) {
      const collection = m.Collection.fromSpec({
        collectionId: `bench-${mech.name}-${p}`,
        dim: p,
        epsilon,
        delta: mech.delta,
        clipRadius: 1,
        minReports: 1n,
        localMechanism: mech.localMechanism,
        encoding: mech.encoding,
      });
      const perturber = new m.Perturber(collection);
      const noise = m.DiscreteGaussianSampler.fromOsRng();
      const words = new Uint32Array(p);
      globalThis.crypto.getRandomValues(words);
      const x = Array.from(words, (w: number) => (w / 2 ** 32 - 0.5) / Math.sqrt(p));
      // One report first: the sampler's tables for this σ, the JIT.
      let bytes = perturber.report(x, noise, m.randomReportId()).payload.length;
      let reports = 0;
      const start = now();
      let elapsed = 0;
      while (reports < config.maxReports && (reports === 0 || elapsed < config.budgetMs)) {
        bytes = perturber.report(x, noise, m.randomReportId()).payload.length;
        reports++;
        elapsed = now() - start;
      }
      out.push({ mechanism: mech.name, epsilon, p, reports, ms_per_report: elapsed / reports, payload_bytes: bytes });
    }
  }
  return out;
}

/**
 * The rank-one ε sweep of `results` as a Markdown table (ms per report, one row per p)
 * and the flatness ratios ε = 8 ÷ ε = 1 at p = 1000 and ε = 9.37 ÷ ε = 1 at p = 20.
 * Runs in Node only (the results come back from the page as JSON).
 */
export function sweepTable(runtime: string, results: Measurement[]): string {
  const sweep = results.filter((r) => r.mechanism.startsWith("rank-one-eps"));
  if (sweep.length === 0) return `${runtime}: no rank-one ε sweep measured\n`;
  const epsilons = [...new Set(sweep.map((r) => r.epsilon))].sort((a, b) => a - b);
  const dims = [...new Set(sweep.map((r) => r.p))].sort((a, b) => a - b);
  const at = (p: number, epsilon: number) => sweep.find((r) => r.p === p && r.epsilon === epsilon)?.ms_per_report;
  const ms = (v: number | undefined) => (v === undefined ? "–" : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3));
  const lines = [
    `${runtime}, rank-one report, ms per report:`,
    "",
    `| ε | ${epsilons.join(" | ")} |`,
    `| --- |${" --- |".repeat(epsilons.length)}`,
    ...dims.map((p) => `| p = ${p} | ${epsilons.map((e) => ms(at(p, e))).join(" | ")} |`),
    "",
  ];
  const ratio = (p: number, high: number) => {
    const a = at(p, high);
    const b = at(p, 1);
    return a === undefined || b === undefined ? "–" : `${(a / b).toFixed(2)}×`;
  };
  lines.push(`ε = 8 ÷ ε = 1 at p = 1000: ${ratio(1000, 8)}; ε = 9.37 ÷ ε = 1 at p = 20: ${ratio(20, 9.37)}`, "");
  return lines.join("\n");
}
