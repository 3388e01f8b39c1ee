// A minimal TEST relay for the end-to-end tests, not the relay daemon (`ldpcov-relay`):
// it serves `Relay.SubmitSealedReport` over gRPC-Web (connect-node, HTTP/1.1, what the
// client's fetch transport speaks) with a device token, keeps each submission id once,
// and when asked forwards what it holds, shuffled, as one batch to the aggregator's
// `SubmitShuffledBatch` (gRPC over HTTP/2, client streaming: what a browser cannot do,
// so it is done here in Node) with the relay token. It cannot read the reports: it has
// no key.

import { randomBytes, randomInt } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import {
  Aggregator,
  type CollectionParams,
  Relay,
  type SealedReport,
  ShuffledBatchChunkSchema,
  type ShuffledBatchResponse,
} from "../src/gen/ldpcov/v1/ldpcov_pb.js";

export interface TestRelay {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  /** Submissions received (retries of a stored submission id included). */
  calls(): number;
  /** Reports held, not yet forwarded. */
  held(collectionId: string): number;
  /** Forwards every report held for `collectionId`, shuffled, as one batch; returns the aggregator's answer. */
  flush(collectionId: string): Promise<ShuffledBatchResponse>;
  stop(): Promise<void>;
}

export async function startTestRelay(options: {
  aggregatorUrl: string;
  relayToken: string;
  deviceToken: string;
  /** Changes what the relay's GetCollection serves (a hostile or outdated pinned copy). */
  pinned?: (params: CollectionParams) => CollectionParams;
}): Promise<TestRelay> {
  const held = new Map<string, SealedReport[]>();
  const seen = new Set<string>();
  let calls = 0;
  const aggregator = createClient(Aggregator, createGrpcTransport({ baseUrl: options.aggregatorUrl }));
  const handler = connectNodeAdapter({
    grpcWeb: true,
    connect: false,
    grpc: false,
    routes: (router) =>
      router.service(Relay, {
        submitSealedReport(request, context) {
          calls++;
          if (context.requestHeader.get("authorization") !== `Bearer ${options.deviceToken}`) {
            throw new ConnectError("a device token is required", Code.Unauthenticated);
          }
          if (request.sealed === undefined || request.submissionId.length !== 16) {
            throw new ConnectError("a sealed report and a 16-byte submission id are required", Code.InvalidArgument);
          }
          const id = `${request.collectionId}/${Buffer.from(request.submissionId).toString("hex")}`;
          if (seen.has(id)) return { duplicate: true };
          seen.add(id);
          const list = held.get(request.collectionId) ?? [];
          list.push(request.sealed);
          held.set(request.collectionId, list);
          return { duplicate: false };
        },
        // The devices read a shuffled collection's keys through the relay: this test
        // relay passes the aggregator's answer on (the real relay serves its pinned copy).
        async getCollection(request, context) {
          if (context.requestHeader.get("authorization") !== `Bearer ${options.deviceToken}`) {
            throw new ConnectError("a device token is required", Code.Unauthenticated);
          }
          const params = await aggregator.getCollection(
            { collectionId: request.collectionId },
            { headers: { authorization: `Bearer ${options.relayToken}` } },
          );
          return options.pinned === undefined ? params : options.pinned(params);
        },
        getRelayStatus(request) {
          return { collectionId: request.collectionId, windowReports: BigInt(held.get(request.collectionId)?.length ?? 0) };
        },
      }),
  });
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    held: (collectionId) => held.get(collectionId)?.length ?? 0,
    async flush(collectionId) {
      const reports = [...(held.get(collectionId) ?? [])];
      // Fisher–Yates with the OS RNG: the aggregator sees the batch in a random order.
      for (let i = reports.length - 1; i > 0; i--) {
        const j = randomInt(i + 1);
        [reports[i], reports[j]] = [reports[j]!, reports[i]!];
      }
      const batchId = new Uint8Array(randomBytes(16));
      const batchSize = BigInt(reports.length);
      async function* chunks() {
        for (let i = 0; i < reports.length; i += 16) {
          yield create(ShuffledBatchChunkSchema, { collectionId, batchId, batchSize, reports: reports.slice(i, i + 16) });
        }
      }
      const response = await aggregator.submitShuffledBatch(chunks(), { headers: { authorization: `Bearer ${options.relayToken}` } });
      held.delete(collectionId);
      return response;
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e === undefined ? resolve() : reject(e)));
      }),
  };
}
