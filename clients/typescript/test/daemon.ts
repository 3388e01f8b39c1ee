// The real daemon for the end-to-end tests: `ldpcov-aggregator serve --memory --grpc-web`
// in a child process, its address read from its log. The binary's path comes from
// LDPCOV_AGGREGATOR_BIN, which the Rust test that runs these tests sets
// (testing/system/tests/system/typescript_client.rs). Without it, or if the daemon does not start, the
// tests FAIL: they never skip.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";

export const ADMIN_TOKEN = "ts-admin-secret";
export const SUBMIT_TOKEN = "ts-submit-secret";

export function aggregatorBinary(): string {
  const bin = process.env["LDPCOV_AGGREGATOR_BIN"];
  if (bin === undefined || bin === "") {
    throw new Error(
      "LDPCOV_AGGREGATOR_BIN is not set: the end-to-end tests need the ldpcov-aggregator binary " +
        "(run them with `cargo test -p ldpcov-system-tests --test system typescript_client::`, or build it with " +
        "`cargo build -p ldpcov-cli --bin ldpcov-aggregator` and set LDPCOV_AGGREGATOR_BIN=target/debug/ldpcov-aggregator)",
    );
  }
  if (!existsSync(bin)) throw new Error(`LDPCOV_AGGREGATOR_BIN=${bin} does not exist`);
  return bin;
}

export interface Daemon {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  log(): string;
  stop(): Promise<void>;
}

/** Starts `serve --memory --grpc-web` with the two tokens and `extra` flags; rejects if it does not announce its address within 20 s. */
export function startDaemon(extra: string[] = []): Promise<Daemon> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("LDPCOV_") && k !== "RUST_LOG") env[k] = v;
  env["NO_COLOR"] = "1";
  const args = [
    "serve",
    "--listen",
    "127.0.0.1:0",
    "--log",
    "info",
    "--memory",
    "--grpc-web",
    "--admin-token",
    ADMIN_TOKEN,
    "--submit-token",
    SUBMIT_TOKEN,
    ...extra,
  ];
  const child: ChildProcess = spawn(aggregatorBinary(), args, { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the daemon did not announce its address within 20 s; its log:\n${log}`));
    }, 20_000);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start the daemon: ${e.message}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the daemon exited (${code ?? signal}) before announcing its address; its log:\n${log}`));
    });
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      log += `${line}\n`;
      const addr = /ldpcov aggregator listening.*\baddr=(\S+)/.exec(line)?.[1];
      if (addr !== undefined) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        const exited = new Promise<void>((done) => child.once("exit", () => done()));
        resolve({
          url: `http://${addr}`,
          log: () => log,
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) {
              child.kill("SIGTERM");
              const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
              await exited;
              clearTimeout(killer);
            }
          },
        });
      }
    });
  });
}
