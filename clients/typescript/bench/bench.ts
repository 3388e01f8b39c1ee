// `npm run bench`: the time to build one report (clip, exact noise, encoding) at
// p = 10, 100, 1000 for each mechanism at ε = 1, and the rank-one report swept over
// ε = 0.5, 1, 2, 4, 8, 9.37, 12, 16 at p = 20 and 1000 as the Rust bench
// (`client/benches/report.rs`: both components of its mixture are drawn every report,
// about 5–6 rounds of p + 1 draws at ε ≤ 2, 8–10 at ε = 8, 13–14 at ε = 16), in Node
// and in headless Chromium (the bundled package in a page on localhost), printed as
// one JSON document on stdout, and the ε sweep of each runtime as a Markdown table with
// its flatness ratios on stderr.
// One function, `measure` (measure.ts), does the timing in both runtimes: Node calls it
// directly, the page runs its source text, timing itself with the page's
// performance.now().
// Arguments name the runtimes (`node`, `chromium`; both when none):
// `npm run bench:browser` is `node dist/bench/bench.js chromium`; `--sweep` measures
// the rank-one ε sweep only (`npm run bench -- --sweep`, `npm run bench:browser -- --sweep`).
// BENCH_BUDGET_MS (default 1000) bounds the time per (mechanism, p); BENCH_BROWSER=0
// skips the browser.

import * as ldpcov from "../src/index.js";
import { Encoding, LocalMechanism } from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import { launch, servePage } from "../test-browser/browser.js";
import { type MeasureConfig, type Measurement, measure, sweepTable } from "./measure.js";

const config: MeasureConfig = {
  mechanisms: [
    { name: "gaussian-svec-i32", localMechanism: LocalMechanism.GAUSSIAN, encoding: Encoding.I32_LE, delta: 1e-6 },
    { name: "gaussian-triu-i32", localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I32_LE, delta: 1e-6 },
    { name: "gaussian-triu-i16", localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I16_LE, delta: 1e-6 },
    { name: "gaussian-triu-i8", localMechanism: LocalMechanism.GAUSSIAN_TRIU, encoding: Encoding.I8, delta: 1e-6 },
    { name: "rank-one", localMechanism: LocalMechanism.RANK_ONE, encoding: Encoding.I16_LE, delta: 0 },
    ...[0.5, 1, 2, 4, 8, 9.37, 12, 16].map((epsilon) => ({
      name: `rank-one-eps${epsilon}`,
      localMechanism: LocalMechanism.RANK_ONE,
      encoding: Encoding.I16_LE,
      delta: 0,
      epsilon,
      dims: [20, 1000],
    })),
  ],
  dims: [10, 100, 1000],
  budgetMs: Number(process.env["BENCH_BUDGET_MS"] ?? 1000),
  maxReports: 1000,
};

const RUNTIMES = ["node", "chromium"];
const sweepOnly = process.argv.includes("--sweep");
if (sweepOnly) config.mechanisms = config.mechanisms.filter((m) => m.name.startsWith("rank-one-eps"));
const args = process.argv.slice(2).filter((a) => a !== "--sweep");
for (const a of args) {
  if (!RUNTIMES.includes(a)) throw new Error(`unknown runtime ${a}: expected ${RUNTIMES.join(" or ")}`);
}
const runNode = args.length === 0 || args.includes("node");
const runChromium = (args.length === 0 && process.env["BENCH_BROWSER"] !== "0") || args.includes("chromium");

/** `measure(config)` in headless Chromium: the bundled package in a page on localhost. */
async function measureInChromium(config: MeasureConfig): Promise<{ version: string; results: Measurement[] }> {
  const { server, origin } = await servePage();
  try {
    const browser = await launch();
    try {
      const page = await browser.context.newPage();
      await page.goto(`${origin}/`);
      await page.waitForFunction(() => document.getElementById("state")?.textContent === "ready");
      const version = browser.context.browser()?.version() ?? (await page.evaluate(() => navigator.userAgent));
      const results = (await page.evaluate(`(${measure.toString()})(window.ldpcov, ${JSON.stringify(config)})`)) as Measurement[];
      return { version, results };
    } finally {
      await browser.close();
    }
  } finally {
    server.close();
  }
}

const result: Record<string, unknown> = {
  what: "milliseconds to build one report (clip, exact discrete Gaussian or rank-one draw, encoding), epsilon 1 unless given, delta 1e-6 (0 for rank-one), sampler seeded from crypto.getRandomValues",
};

if (runNode) {
  const results = await measure(ldpcov, config);
  result["node"] = { version: process.version, results };
  process.stderr.write(sweepTable(`Node ${process.version}`, results) + "\n");
}

if (runChromium) {
  const chromium = await measureInChromium(config);
  result["chromium"] = chromium;
  process.stderr.write(sweepTable(`Chromium ${chromium.version}`, chromium.results) + "\n");
}

console.log(JSON.stringify(result, null, 2));
