// What the browser test and the browser benchmark share: the package bundled for the
// browser (the built dist/src with esbuild), a tiny page served on localhost that loads
// it, and headless Chromium (Debian's `chromium`) driven by playwright-core.

import { mkdtemp, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { type BrowserContext, chromium } from "playwright-core";

/** The browser: Debian's chromium unless CHROMIUM says otherwise. Never downloaded. */
export const CHROMIUM = process.env["CHROMIUM"] ?? "/usr/bin/chromium";

/** The built package's entry point (`npm run build` first). */
const ENTRY = fileURLToPath(new URL("../src/index.js", import.meta.url));

/** The built package as one ES module for the browser. */
export async function bundle(): Promise<string> {
  if (!existsSync(ENTRY)) throw new Error(`${ENTRY} is missing: build the package first (npm run build)`);
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return result.outputFiles[0]!.text;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>ldpcov client</title></head>
<body><p id="state">loading</p>
<script type="module">
import * as ldpcov from "/ldpcov-client.js";
window.ldpcov = ldpcov;
document.getElementById("state").textContent = "ready";
</script></body></html>`;

/** A page server on 127.0.0.1 (`/` the page, `/ldpcov-client.js` the bundle). */
export async function servePage(): Promise<{ server: Server; origin: string }> {
  const js = await bundle();
  const server = createServer((request, response) => {
    if (request.url === "/") {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(PAGE);
    } else if (request.url === "/ldpcov-client.js") {
      response.writeHead(200, { "content-type": "text/javascript; charset=utf-8" }).end(js);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { server, origin: `http://127.0.0.1:${port}` };
}

/** Headless Chromium with a fresh profile; fails if the browser is missing. */
export async function launch(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM`);
  }
  const profile = await mkdtemp(join(tmpdir(), "ldpcov-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
