// The gRPC-Web client without a daemon: a report is complete (ledger charged, noise drawn)
// before any call, retries resend the same bytes under the same id and only for the
// retryable codes, bad input and refused collections send nothing, and the bearer token
// and gRPC-Web framing are what the daemon expects (through the real gRPC-Web transport
// over a recording fetch).

import assert from "node:assert/strict";
import { test } from "node:test";
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import {
  Aggregator,
  type CollectionParams,
  CollectionParamsSchema,
  PrivacyModel,
  RadiusPhaseSpecSchema,
  ReportSchema,
  SubmitReportResponseSchema,
} from "../src/gen/ldpcov/v1/ldpcov_pb.js";
import {
  AggregatorClient,
  BudgetExceededError,
  BudgetLedger,
  CentralCollectionError,
  CollectionMismatchError,
  DEFAULT_BUDGET_LIMITS,
  DiscreteGaussianSampler,
  InputError,
  InvalidTokenError,
  isRetryable,
  MemoryLedgerStorage,
  PolicyViolationError,
  ReportBuilder,
  SpecError,
  StatusError,
} from "../src/index.js";
import { Collection } from "../src/collection.js";
import { f64, hex, unhex, vectors } from "./helpers.js";

const byName = (name: string) => {
  const c = vectors.cases.find((k) => k.name === name);
  assert.ok(c, name);
  return c;
};
const paramsOf = (name: string): CollectionParams => fromBinary(CollectionParamsSchema, unhex(byName(name).params_hex));
const FAST = { maxAttempts: 5, initialBackoffMs: 1, maxBackoffMs: 4 };

/** A fake aggregator: serves `params`, fails SubmitReport with `failures` first, records every report received. */
function fakeAggregator(params: CollectionParams[], failures: Code[] = []) {
  const received: Uint8Array[] = [];
  const calls: string[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(Aggregator, {
      getCollection(request) {
        calls.push("GetCollection");
        const found = params.find((p) => p.spec?.collectionId === request.collectionId);
        if (found === undefined) throw new ConnectError("no such collection", Code.NotFound);
        return found;
      },
      submitReport(report) {
        calls.push("SubmitReport");
        received.push(toBinary(ReportSchema, report));
        const failure = failures.shift();
        if (failure !== undefined) throw new ConnectError("injected", failure);
        return { duplicate: received.length > 1 };
      },
    });
  });
  return { transport, received, calls };
}

test("submit sends the vector's exact payload, built before the call", async () => {
  const c = byName("gaussian-svec-i16-mean-cov-centre-p3");
  const fake = fakeAggregator([paramsOf(c.name)]);
  const client = new AggregatorClient("http://unused", {
    transport: fake.transport,
    noise: DiscreteGaussianSampler.fromSeedForSimulation(BigInt(c.seed)),
  });
  const collection = await client.collection(paramsOf(c.name).spec!.collectionId);
  for (const r of c.reports) {
    const outcome = await client.submit(collection, r.x.map(f64));
    assert.equal(outcome.attempts, 1);
    const sent = fromBinary(ReportSchema, fake.received.at(-1)!);
    assert.equal(hex(sent.payload), r.payload);
    assert.deepEqual(sent.reportId, outcome.reportId);
  }
});

test("the report builder alone builds the vectors' payloads, with no transport; refusals come before the spend", async () => {
  const c = byName("gaussian-svec-i16-mean-cov-centre-p3");
  const collection = Collection.fromParams(paramsOf(c.name));
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), DEFAULT_BUDGET_LIMITS);
  const device = new ReportBuilder({ noise: DiscreteGaussianSampler.fromSeedForSimulation(BigInt(c.seed)), ledger });
  await assert.rejects(device.report(collection, [0.1]), InputError);
  assert.equal(ledger.lifetimeEpsilon, 0);
  for (const r of c.reports) {
    const report = await device.report(collection, r.x.map(f64));
    assert.equal(hex(report.payload), r.payload);
    assert.equal(report.reportId.length, 16);
  }
  assert.ok(ledger.lifetimeEpsilon > 0);
});

test("retryable failures resend the same bytes under the same id; the outcome counts the attempts", async () => {
  const c = byName("rank-one-second-moment-p3");
  const fake = fakeAggregator([paramsOf(c.name)], [Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Aborted]);
  const client = new AggregatorClient("http://unused", { transport: fake.transport, retry: FAST });
  const collection = await client.collection(paramsOf(c.name).spec!.collectionId);
  const outcome = await client.submit(collection, c.reports[0]!.x.map(f64));
  assert.equal(outcome.attempts, 5);
  assert.equal(fake.received.length, 5);
  for (const bytes of fake.received) assert.deepEqual(bytes, fake.received[0]);
  assert.deepEqual(fromBinary(ReportSchema, fake.received[0]!).reportId, outcome.reportId);
});

test("non-retryable failures and a spent retry policy surface as StatusError", async () => {
  const params = paramsOf("gaussian-triu-i32-second-moment-p7");
  const id = params.spec!.collectionId;
  for (const code of [Code.InvalidArgument, Code.FailedPrecondition, Code.NotFound, Code.PermissionDenied, Code.Unauthenticated, Code.Unknown]) {
    const fake = fakeAggregator([params], [code]);
    const client = new AggregatorClient("http://unused", { transport: fake.transport, retry: FAST });
    const collection = await client.collection(id);
    await assert.rejects(client.submit(collection, new Array(7).fill(0.1)), (e: unknown) => e instanceof StatusError && e.code === code && e.attempts === 1);
    assert.equal(fake.received.length, 1, Code[code]);
  }
  const fake = fakeAggregator([params], Array(3).fill(Code.Unavailable));
  const client = new AggregatorClient("http://unused", { transport: fake.transport, retry: { ...FAST, maxAttempts: 3 } });
  const collection = await client.collection(id);
  await assert.rejects(client.submit(collection, new Array(7).fill(0.1)), (e: unknown) => e instanceof StatusError && e.codeName === "UNAVAILABLE" && e.attempts === 3);
  assert.equal(fake.received.length, 3);
});

test("isRetryable mirrors the Rust client: transport failures yes, a server's UNKNOWN no", () => {
  for (const code of [Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Aborted]) assert.ok(isRetryable(new ConnectError("x", code)));
  for (const code of [Code.InvalidArgument, Code.NotFound, Code.FailedPrecondition, Code.Internal, Code.Canceled]) assert.ok(!isRetryable(new ConnectError("x", code)));
  assert.ok(isRetryable(new TypeError("fetch failed")), "a failed fetch is UNKNOWN with a cause");
  assert.ok(!isRetryable(new ConnectError("from the server", Code.Unknown)));
});

test("bad input raises InputError and sends nothing, charges nothing", async () => {
  const params = paramsOf("gaussian-svec-i32-second-moment-p3");
  const fake = fakeAggregator([params]);
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage());
  const client = new AggregatorClient("http://unused", { transport: fake.transport, ledger });
  const collection = await client.collection(params.spec!.collectionId);
  for (const x of [[0.1, Number.NaN, 0.2], [0.1, 0.2], [0.1, 0.2, 0.3, 0.4], [Infinity, 0, 0]]) {
    await assert.rejects(client.submit(collection, x), InputError);
  }
  assert.equal(fake.received.length, 0);
  assert.equal(ledger.spends.length, 0);
});

test("the ledger is charged before the report leaves and refuses once the budget is spent", async () => {
  const params = paramsOf("gaussian-svec-i32-second-moment-p3");
  const fake = fakeAggregator([params]);
  const ledger = await BudgetLedger.open(new MemoryLedgerStorage(), { ...DEFAULT_BUDGET_LIMITS, lifetimeEpsilon: 3, periodEpsilon: null });
  let spendsAtSend = -1;
  const client = new AggregatorClient("http://unused", {
    transport: createRouterTransport(({ service }) =>
      service(Aggregator, {
        getCollection: () => params,
        submitReport(report) {
          spendsAtSend = ledger.spends.length;
          fake.received.push(toBinary(ReportSchema, report));
          return create(SubmitReportResponseSchema, {});
        },
      }),
    ),
    ledger,
  });
  const collection = await client.collection(params.spec!.collectionId);
  let sent = 0;
  for (; sent < 100; sent++) {
    try {
      await client.submit(collection, [0.1, 0.2, 0.3]);
    } catch (e) {
      assert.ok(e instanceof BudgetExceededError, String(e));
      break;
    }
    assert.equal(spendsAtSend, sent + 1, "charged before the call");
  }
  assert.ok(sent >= 1);
  assert.equal(fake.received.length, sent);
  assert.equal(ledger.spends.length, sent);
});

test("refused collections send nothing: less noise, another id, weaker privacy than the policy, central, two-aggregator, radius phase", async () => {
  const params = paramsOf("gaussian-svec-i32-second-moment-p3");
  const id = params.spec!.collectionId;
  const lessNoise = clone(CollectionParamsSchema, params);
  lessNoise.sigma *= 0.99;
  let client = new AggregatorClient("http://unused", { transport: fakeAggregator([lessNoise]).transport });
  await assert.rejects(client.collection(id), SpecError);

  const strict = new AggregatorClient("http://unused", {
    transport: fakeAggregator([params]).transport,
    policy: { maxEpsilon: params.spec!.epsilon / 2, maxDelta: 1e-3 },
  });
  await assert.rejects(strict.collection(id), PolicyViolationError);

  const mismatch = createRouterTransport(({ service }) => service(Aggregator, { getCollection: () => params }));
  await assert.rejects(new AggregatorClient("http://unused", { transport: mismatch }).collection("not-this-one"), CollectionMismatchError);

  const central = paramsOf("central-raw-second-moment-p3");
  const fake = fakeAggregator([central]);
  client = new AggregatorClient("http://unused", { transport: fake.transport });
  const c = await client.collection(central.spec!.collectionId);
  await assert.rejects(client.submit(c, [0.1, 0.2, 0.3]), CentralCollectionError);
  assert.equal(fake.received.length, 0);
  // The trusted-curator path sends the raw vector on the grid, as the vectors have it.
  const r = byName("central-raw-second-moment-p3").reports[0]!;
  await client.submitToTrustedCurator(c, r.x.map(f64));
  assert.equal(hex(fromBinary(ReportSchema, fake.received[0]!).payload), r.payload);

  // A two-aggregator collection: refused when derived (this client builds no Prio3
  // shares), so nothing can be sent to it.
  const two = clone(CollectionParamsSchema, central);
  two.spec!.privacyModel = PrivacyModel.TWO_AGGREGATOR;
  const twoFake = fakeAggregator([two]);
  client = new AggregatorClient("http://unused", { transport: twoFake.transport });
  await assert.rejects(client.collection(two.spec!.collectionId), (e: unknown) => {
    assert.ok(e instanceof SpecError, String(e));
    assert.match(e.message, /two-aggregator/);
    return true;
  });
  assert.equal(twoFake.received.length, 0);

  // A collection with a radius phase: refused when derived, so neither its norm report
  // nor a main report at the wrong ε can be sent.
  const phased = clone(CollectionParamsSchema, params);
  phased.spec!.radiusPhase = create(RadiusPhaseSpecSchema, { share: 0.1, smallestRadius: 0.5, largestRadius: 8, radii: 5 });
  const phasedFake = fakeAggregator([phased]);
  client = new AggregatorClient("http://unused", { transport: phasedFake.transport });
  await assert.rejects(client.collection(id), (e: unknown) => {
    assert.ok(e instanceof SpecError, String(e));
    assert.match(e.message, /radius phase/);
    return true;
  });
  assert.equal(phasedFake.received.length, 0);
});

/** A gRPC-Web body: the message frame then the trailer frame. */
function grpcWebBody(message: Uint8Array | undefined, status: number, text = ""): Uint8Array<ArrayBuffer> {
  const frames: Uint8Array[] = [];
  const frame = (flag: number, data: Uint8Array) => {
    const out = new Uint8Array(5 + data.length);
    out[0] = flag;
    new DataView(out.buffer).setUint32(1, data.length);
    out.set(data, 5);
    frames.push(out);
  };
  if (message !== undefined) frame(0, message);
  frame(0x80, new TextEncoder().encode(`grpc-status: ${status}\r\ngrpc-message: ${encodeURIComponent(text)}\r\n`));
  const out = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const f of frames) {
    out.set(f, at);
    at += f.length;
  }
  return out;
}

test("over the real gRPC-Web transport: bearer token, framing, failed fetches retried", async () => {
  assert.throws(() => new AggregatorClient("http://x", { token: "has space" }), InvalidTokenError);
  assert.throws(() => new AggregatorClient("http://x", { token: "  " }), InvalidTokenError);
  const params = paramsOf("rank-one-second-moment-p1");
  const seen: { url: string; headers: Headers; body: Uint8Array }[] = [];
  let failFetches = 2;
  const fetch: typeof globalThis.fetch = async (input, init) => {
    if (failFetches-- > 0) throw new TypeError("fetch failed");
    const url = String(input);
    const body = new Uint8Array(init!.body as Uint8Array);
    seen.push({ url, headers: new Headers(init!.headers), body });
    const reply = url.endsWith("/GetCollection")
      ? grpcWebBody(toBinary(CollectionParamsSchema, params), 0)
      : grpcWebBody(toBinary(SubmitReportResponseSchema, create(SubmitReportResponseSchema, { duplicate: false })), 0);
    return new Response(reply, { status: 200, headers: { "content-type": "application/grpc-web+proto" } });
  };
  const client = new AggregatorClient("http://aggregator.test", { token: " device-token ", fetch, retry: FAST });
  const collection = await client.collection(params.spec!.collectionId);
  const outcome = await client.submit(collection, [0.5]);
  assert.equal(outcome.attempts, 1);
  assert.deepEqual(
    seen.map((s) => s.url),
    ["http://aggregator.test/ldpcov.v1.Aggregator/GetCollection", "http://aggregator.test/ldpcov.v1.Aggregator/SubmitReport"],
  );
  for (const s of seen) {
    assert.equal(s.headers.get("authorization"), "Bearer device-token");
    assert.equal(s.headers.get("content-type"), "application/grpc-web+proto");
    assert.equal(s.body[0], 0, "an uncompressed frame");
  }
  const report = fromBinary(ReportSchema, seen[1]!.body.subarray(5));
  assert.deepEqual(report.reportId, outcome.reportId);
  // A status the server sent in its trailer (UNKNOWN included) is not retried.
  let calls = 0;
  const unknown: typeof globalThis.fetch = async () => {
    calls++;
    return new Response(grpcWebBody(undefined, 2, "server bug"), { status: 200, headers: { "content-type": "application/grpc-web+proto" } });
  };
  const c2 = new AggregatorClient("http://aggregator.test", { fetch: unknown, retry: FAST });
  await assert.rejects(c2.submit(collection, [0.5]), (e: unknown) => e instanceof StatusError && e.codeName === "UNKNOWN" && e.attempts === 1);
  assert.equal(calls, 1);
});

test("an attempt that outlives timeoutMs is a retryable DEADLINE_EXCEEDED", async () => {
  let calls = 0;
  const hanging: typeof globalThis.fetch = (_input, init) => {
    calls++;
    return new Promise((_resolve, reject) => init!.signal!.addEventListener("abort", () => reject(init!.signal!.reason)));
  };
  const client = new AggregatorClient("http://aggregator.test", { fetch: hanging, timeoutMs: 30, retry: { ...FAST, maxAttempts: 2 } });
  await assert.rejects(client.status("x"), (e: unknown) => e instanceof StatusError && e.codeName === "DEADLINE_EXCEEDED" && e.attempts === 2);
  assert.equal(calls, 2);
});
