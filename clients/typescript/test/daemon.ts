// The real daemons for the end-to-end tests, each in a child process, its address read
// from its log: the aggregator (`ldpcov-aggregator serve --memory --grpc-web`) and the
// anonymising relay (`ldpcov-relay serve --grpc-web`, what a browser device must reach).
// The binaries' paths come from LDPCOV_AGGREGATOR_BIN and LDPCOV_RELAY_BIN, which the Rust
// test that runs these tests sets (testing/system/tests/system/typescript_client.rs).
// Without them, or if a daemon does not start, the tests FAIL: they never skip.

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { Relay as RelayService, type RelayStatus } from "../src/gen/ldpcov/v1/ldpcov_pb.js";

export const ADMIN_TOKEN = "ts-admin-secret";
export const SUBMIT_TOKEN = "ts-submit-secret";
/** The relay's admin token (its GetRelayStatus). */
export const RELAY_ADMIN_TOKEN = "ts-relay-admin-secret";

/** The binary named by `variable`; throws, with how to get it, when it is not set or missing. */
function binary(variable: string, crate: string, bin: string): string {
  const path = process.env[variable];
  if (path === undefined || path === "") {
    throw new Error(
      `${variable} is not set: the end-to-end tests need the ${bin} binary ` +
        "(run them with `cargo test -p ldpcov-system-tests --test system typescript_client::`, or build it with " +
        `\`cargo build -p ${crate} --bin ${bin}\` and set ${variable}=target/debug/${bin})`,
    );
  }
  if (!existsSync(path)) throw new Error(`${variable}=${path} does not exist`);
  return path;
}

export function aggregatorBinary(): string {
  return binary("LDPCOV_AGGREGATOR_BIN", "ldpcov-aggregator-cli", "ldpcov-aggregator");
}

export function relayBinary(): string {
  return binary("LDPCOV_RELAY_BIN", "ldpcov-relay-cli", "ldpcov-relay");
}

/** The environment of a daemon: this one without any LDPCOV_* variable or RUST_LOG, so a daemon sees only the flags it is given. */
function daemonEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("LDPCOV_") && k !== "RUST_LOG") env[k] = v;
  env["NO_COLOR"] = "1";
  return env;
}

interface Started {
  /** The address the daemon announced (`127.0.0.1:PORT`). */
  addr: string;
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts `bin args` and waits until its log announces `ldpcov <name> listening … addr=…`
 * (the port its `--listen 127.0.0.1:0` got); rejects, with the log, if it exits first or
 * does not announce within 20 s.
 */
function startAnnouncing(name: string, bin: string, args: string[]): Promise<Started> {
  const child: ChildProcess = spawn(bin, args, { env: daemonEnv(), stdio: ["ignore", "ignore", "pipe"] });
  const announced = new RegExp(`ldpcov ${name} listening.*\\baddr=(\\S+)`);
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the ${name} did not announce its address within 20 s; its log:\n${log}`));
    }, 20_000);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start the ${name}: ${e.message}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the ${name} exited (${code ?? signal}) before announcing its address; its log:\n${log}`));
    });
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      log += `${line}\n`;
      const addr = announced.exec(line)?.[1];
      if (addr !== undefined) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        const exited = new Promise<void>((done) => child.once("exit", () => done()));
        resolve({
          addr,
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

export interface Daemon {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  log(): string;
  stop(): Promise<void>;
}

/** Starts `serve --memory --grpc-web` with the two tokens and `extra` flags; rejects if it does not announce its address within 20 s. */
export async function startDaemon(extra: string[] = []): Promise<Daemon> {
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
  const started = await startAnnouncing("aggregator", aggregatorBinary(), args);
  return { url: `http://${started.addr}`, log: started.log, stop: started.stop };
}

export interface Relay {
  /** `http://127.0.0.1:PORT`, serving devices over gRPC-Web (and native gRPC). */
  url: string;
  /** A device token for `deviceId`, issued by the relay's own command line (`ldpcov-relay issue-device-token`). */
  issueDeviceToken(deviceId: string): Promise<string>;
  /** What the relay holds and has forwarded for a collection (GetRelayStatus over gRPC-Web, with its admin token). */
  status(collectionId: string): Promise<RelayStatus>;
  log(): string;
  /** Stops the relay (SIGTERM) and deletes its files. */
  stop(): Promise<void>;
}

/**
 * Starts the real relay, `ldpcov-relay serve --grpc-web`, in front of the aggregator at
 * `aggregatorUrl` with `relayToken` (the aggregator's `--relay-token-file`): a fresh
 * device-token secret, its admin token {@link RELAY_ADMIN_TOKEN} and its store in a
 * temporary directory, plaintext (`--insecure-plaintext`, tests only), a floor of 2
 * reports, due windows checked every 20 ms, and `extra` flags. Rejects if it does not
 * announce its address within 20 s.
 */
export async function startRelay(options: { aggregatorUrl: string; relayToken: string; extra?: string[] }): Promise<Relay> {
  const bin = relayBinary();
  const dir = await mkdtemp(join(tmpdir(), "ldpcov-relay-"));
  const file = async (name: string, contents: string) => {
    const path = join(dir, name);
    await writeFile(path, `${contents}\n`, { mode: 0o600 });
    return path;
  };
  let started: Started;
  let secret: string;
  try {
    const relayToken = await file("relay-token", options.relayToken);
    secret = await file("device-token-secret", randomBytes(32).toString("hex"));
    const admin = await file("admin-token", RELAY_ADMIN_TOKEN);
    started = await startAnnouncing("relay", bin, [
      "--log",
      "info",
      "serve",
      "--listen",
      "127.0.0.1:0",
      "--aggregator",
      options.aggregatorUrl,
      "--relay-token-file",
      relayToken,
      "--device-token-secret-file",
      secret,
      "--admin-token-file",
      admin,
      "--data-dir",
      join(dir, "data"),
      "--batch-check-interval-ms",
      "20",
      "--insecure-plaintext",
      "--min-batch-size",
      "2",
      "--grpc-web",
      ...(options.extra ?? []),
    ]);
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const url = `http://${started.addr}`;
  const adminClient = createClient(
    RelayService,
    createGrpcWebTransport({
      baseUrl: url,
      interceptors: [
        (next) => (request) => {
          request.header.set("authorization", `Bearer ${RELAY_ADMIN_TOKEN}`);
          return next(request);
        },
      ],
    }),
  );
  return {
    url,
    issueDeviceToken: async (deviceId) => {
      const { stdout } = await promisify(execFile)(bin, ["issue-device-token", "--device-token-secret-file", secret, "--device-id", deviceId], {
        env: daemonEnv(),
      });
      return stdout.trim();
    },
    status: (collectionId) => adminClient.getRelayStatus({ collectionId }),
    log: started.log,
    stop: async () => {
      await started.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
