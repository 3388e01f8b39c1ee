#!/usr/bin/env node
// `npm run check-generated`: regenerates src/gen from ../../proto/proto into a temporary
// directory (buf and protoc-gen-es from devDependencies: no registry, no network) and
// fails, with one line naming the differing files, if it differs from the committed
// src/gen. Fix by `npm run generate` and committing src/gen.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const committed = join(root, "src", "gen");
const out = mkdtempSync(join(tmpdir(), "ldpcov-gen-"));

/** Every file under `dir`, as paths relative to it. */
function files(dir) {
  const found = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.push(relative(dir, path));
    }
  };
  try {
    walk(dir);
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
  }
  return found.sort();
}

let status = 0;
try {
  const bin = join(root, "node_modules", ".bin");
  // buf.gen.yaml writes to src/gen: under --output, that is <out>/src/gen.
  const run = spawnSync(join(bin, "buf"), ["generate", join("..", "..", "proto", "proto"), "--output", out], {
    cwd: root,
    env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` },
    encoding: "utf8",
  });
  if (run.error !== undefined || run.status !== 0) {
    const why = run.error?.message ?? run.stderr.trim().split("\n").join(" | ");
    console.error(`check-generated: buf generate failed (run npm ci first?): ${why}`);
    status = 2;
  } else {
    const fresh = join(out, "src", "gen");
    const a = files(committed);
    const b = files(fresh);
    const differing = [...new Set([...a, ...b])]
      .sort()
      .filter((f) => !a.includes(f) || !b.includes(f) || !readFileSync(join(committed, f)).equals(readFileSync(join(fresh, f))))
      .map((f) => `src/gen/${f}${!a.includes(f) ? " (missing)" : !b.includes(f) ? " (not generated)" : ""}`);
    if (differing.length > 0) {
      console.error(`check-generated: src/gen differs from the .proto (run npm run generate and commit): ${differing.join(", ")}`);
      status = 1;
    } else {
      console.log(`check-generated: src/gen matches ../../proto/proto (${a.length} file${a.length === 1 ? "" : "s"})`);
    }
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}
process.exit(status);
