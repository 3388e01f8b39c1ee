/**
 * `@ldpcov/client/node`: what only Node.js has — the budget ledger kept in a file.
 */

import { mkdir, open, readFile, rename } from "node:fs/promises";
import { join } from "node:path";
import { LEDGER_FILE, type LedgerStorage } from "./ledger.js";

/**
 * The ledger in `dir/ldpcov-ledger.json` (the Rust client's file and format). A write
 * goes to a temporary file, is flushed to disk, renamed over the ledger, and the
 * directory is flushed too: a crash leaves the old ledger or the new one, never half
 * of one, and a spend is on disk before the report it pays for is built.
 */
export class FileLedgerStorage implements LedgerStorage {
  readonly path: string;
  readonly description: string;

  constructor(readonly dir: string) {
    this.path = join(dir, LEDGER_FILE);
    this.description = `file ${this.path}`;
  }

  async read(): Promise<string | undefined> {
    try {
      return await readFile(this.path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw e;
    }
  }

  async write(document: string): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const tmp = `${this.path}.tmp`;
    const file = await open(tmp, "w", 0o600);
    try {
      await file.writeFile(document, "utf8");
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, this.path);
    if (process.platform !== "win32") {
      const d = await open(this.dir, "r");
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    }
  }
}

export * from "./index.js";
