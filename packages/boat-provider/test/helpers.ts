import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import {
  type BoatSimulator,
  type BoatSimulatorOptions,
  type FaultRule,
  type SimStats,
  startBoatSimulator,
} from "@drydock/boat-provider/simulator";

export const BODY = { ttlSeconds: 28_800, noEnv: true } as const;

export interface Harness {
  sim: BoatSimulator;
  client: BoatClient;
  faults(rules: FaultRule[]): Promise<void>;
  clearFaults(): Promise<void>;
  advance(ms: number): Promise<void>;
  stats(): Promise<SimStats>;
  history(): Promise<{ sandboxes: unknown[]; operations: unknown[] }>;
  control(method: string, path: string, body?: unknown): Promise<Response>;
  close(): Promise<void>;
}

/** A simulator and a client talking to it over real HTTP; the controls go over HTTP too. */
export async function harness(
  options: BoatSimulatorOptions = {},
  clientOptions: { timeoutMs?: number } = {},
): Promise<Harness> {
  const sim = await startBoatSimulator(options);
  const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token, ...clientOptions });
  const control = (method: string, path: string, body?: unknown): Promise<Response> =>
    fetch(`${sim.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const ok = async (response: Response): Promise<unknown> => {
    const json: unknown = await response.json();
    if (response.status !== 200)
      throw new Error(`control failed: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  return {
    sim,
    client,
    control,
    async faults(rules) {
      await ok(await control("POST", "/_sim/faults", { rules }));
    },
    async clearFaults() {
      await ok(await control("DELETE", "/_sim/faults"));
    },
    async advance(ms) {
      await ok(await control("POST", "/_sim/clock", { advanceMs: ms }));
    },
    async stats() {
      return (await ok(await control("GET", "/_sim/stats"))) as SimStats;
    },
    async history() {
      return (await ok(await control("GET", "/_sim/sandboxes"))) as {
        sandboxes: unknown[];
        operations: unknown[];
      };
    },
    close: () => sim.close(),
  };
}

/** Resolves with what the promise rejected with; fails the test if it resolved. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection, got a result");
}

export interface RawServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** A hand-rolled HTTP server answering whatever the handler writes: for malformed provider answers. */
export async function rawServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<RawServer> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}/api/v1`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export const SANDBOX = {
  id: "bx_abcdefgh",
  name: null,
  state: "running",
  createdAt: "2026-01-01T00:00:00.000Z",
  ttlSeconds: 28_800,
} as const;

export const OPERATION = {
  id: `bdop_${"a".repeat(32)}`,
  kind: "sandbox",
  targetId: "bx_abcdefgh",
  status: "pending",
  requestedAt: "2026-01-01T00:00:00.000Z",
} as const;
