/**
 * Boat recovery when boat.dev's answer proves nothing. Proof that a Boat is gone is only boat.dev's own
 * 404 `not_found` / 410 `gone` for the Boat's id (or a completed deletion operation). A 5xx, a 429, a
 * timeout, a dropped connection, or a 404/410 that is not boat.dev's (a proxy's page without the error
 * envelope, which the client reports as `http_error`) must pass the provider's failure through unchanged,
 * leave every journal byte as it was, and show the Boat as unknown in the plan, never as gone.
 *
 * Everything runs against the boat.dev simulator over real HTTP. Faults are injected with its
 * `/_sim/faults` control, or (for a proxy's page, which the simulator cannot serve) by a fetch wrapper in
 * front of it; both are scoped to `GET /sandboxes/<id>` of the Boats under test.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle, DELETE_IN_FLIGHT_MS } from "@drydock/boat-lifecycle";
import {
  type BoatClient,
  createBoatClient,
  isBoatApiError,
  isBoatTransportError,
} from "@drydock/boat-provider";
import { type BoatSimulator, type FaultRule, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type BoatRecovery, createBoatRecovery, isRecoveryError } from "../src/index.js";

const BODY = { ttlSeconds: 600, noEnv: true } as const;
const TIMEOUT_CLIENT_MS = 300;

let sim: BoatSimulator;
let dir: string | undefined;

/** A proxy in front of boat.dev that answers its own error page for some Boats' GET. */
let proxy: { ids: ReadonlySet<string>; status: number; remaining: number } | null = null;
const proxyFetch = (input: string, init: RequestInit): Promise<Response> => {
  const path = new URL(input).pathname;
  const id = /\/api\/v1\/sandboxes\/([^/]+)$/.exec(path)?.[1];
  if (proxy && proxy.remaining > 0 && (init.method ?? "GET") === "GET" && id && proxy.ids.has(id)) {
    proxy.remaining -= 1;
    const status = proxy.status;
    return Promise.resolve(
      new Response(`<html><body><h1>${status} Not Found</h1><hr>nginx</body></html>`, {
        status,
        headers: { "content-type": "text/html" },
      }),
    );
  }
  return fetch(input, init);
};

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0, deletionPolls: 1 });
});
afterAll(async () => {
  await sim?.close();
});
afterEach(async () => {
  proxy = null;
  await control("DELETE", "/_sim/faults");
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

async function control(method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json: unknown = await response.json();
  if (response.status !== 200) throw new Error(`control failed: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

function makeClient(timeoutMs?: number): BoatClient {
  return createBoatClient({
    baseUrl: sim.apiUrl,
    token: sim.token,
    fetch: proxyFetch,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });
}

interface Scenario {
  recovery: BoatRecovery;
  /** Key journaled, Boat created with it and its id remembered, never named nor resolved. */
  unresolved: { botId: string; boxId: string };
  /** Provisioned: named and resolved. */
  resolved: { botId: string; boxId: string };
  /** Provisioned, then fenced for deletion (prepared: the DELETE was never confirmed). */
  fenced: { botId: string; boxId: string };
  /** The two journal files, byte for byte. */
  journals(): { creates: string; deletes: string };
}

/**
 * Three Boats that all exist at boat.dev, in the three journal situations the actions judge. They are set
 * up through a client with the default timeout; the recovery under test talks through `client`.
 */
async function scenario(client: BoatClient): Promise<Scenario> {
  dir = mkdtempSync(join(tmpdir(), "drydock-boat-faults-"));
  const dataDir = dir;
  const environmentId = `env-${Math.random().toString(36).slice(2, 10)}`;
  const createJournal = openBoatCreateJournal({ dataDir });
  const deleteJournal = openBoatDeleteJournal({ dataDir });
  const lifecycleVia = (via: BoatClient) =>
    createBoatLifecycle({ client: via, createJournal, deleteJournal, environmentId, sleep: async () => {} });
  const lifecycle = lifecycleVia(client);
  // The recovery looks at the journals from later than the in-flight window: the fence's DELETE is not on
  // the wire any more, so a healthy plan offers the retry (inside the window it names the wait instead).
  const recovery = createBoatRecovery({
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    environmentId,
    now: () => Date.now() + DELETE_IN_FLIGHT_MS + 1_000,
  });

  const setup = makeClient();
  const { request } = await createJournal.beginBoatCreate("bot-unresolved", JSON.stringify(BODY));
  const made = await setup.createSandbox(BODY, { idempotencyKey: request.idempotencyKey });
  await createJournal.rememberCreatedBoat(request, made.sandbox.id);
  const resolved = await lifecycleVia(setup).provision("bot-resolved");
  const fenced = await lifecycleVia(setup).provision("bot-fenced");
  await deleteJournal.prepareBoatDeletion({
    boxId: fenced.boxId,
    name: fenced.name,
    ownerBotId: "bot-fenced",
  });

  return {
    recovery,
    unresolved: { botId: "bot-unresolved", boxId: made.sandbox.id },
    resolved: { botId: "bot-resolved", boxId: resolved.boxId },
    fenced: { botId: "bot-fenced", boxId: fenced.boxId },
    journals: () => ({
      creates: readFileSync(join(dataDir, "box-create-requests.json"), "utf8"),
      deletes: readFileSync(join(dataDir, "box-delete-requests.json"), "utf8"),
    }),
  };
}

interface Fault {
  name: string;
  /** A client with a short timeout (only for the timeout fault). */
  timeoutMs?: number;
  /** Makes the next `times` GETs of these Boats fail this way. */
  inject(ids: readonly string[], times: number): Promise<void>;
  /** The error the provider failure must surface as, unchanged. */
  is(error: unknown): boolean;
}

function simFault(
  name: string,
  rule: Omit<FaultRule, "method" | "path" | "times">,
  is: (error: unknown) => boolean,
  timeoutMs?: number,
): Fault {
  return {
    name,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    async inject(ids, times) {
      await control("POST", "/_sim/faults", {
        rules: [{ ...rule, method: "GET", path: `^/sandboxes/(${ids.join("|")})$`, times }],
      });
    },
    is,
  };
}

function proxyFault(status: number): Fault {
  return {
    name: `${status} from a proxy without boat.dev's envelope (http_error)`,
    async inject(ids, times) {
      proxy = { ids: new Set(ids), status, remaining: times };
    },
    is: (error) => isBoatApiError(error) && error.status === status && error.code === "http_error",
  };
}

const apiError =
  (status: number, code: string) =>
  (error: unknown): boolean =>
    isBoatApiError(error) && error.status === status && error.code === code;

/** Answers that prove nothing about the Boat's existence. */
const UNPROVEN: Fault[] = [
  simFault(
    "500 internal_error",
    { action: "fail-before", status: 500, code: "internal_error" },
    apiError(500, "internal_error"),
  ),
  simFault(
    "503 service_unavailable",
    { action: "fail-before", status: 503, code: "service_unavailable" },
    apiError(503, "service_unavailable"),
  ),
  simFault(
    "502 after the read (fail-after)",
    { action: "fail-after", status: 502, code: "bad_gateway" },
    apiError(502, "bad_gateway"),
  ),
  simFault("429 rate_limited", { action: "rate-limit", retryAfterS: 5 }, apiError(429, "rate_limited")),
  simFault(
    "a timeout",
    { action: "delay", ms: 1_200 },
    (error) => isBoatTransportError(error) && error.timedOut && error.phase === "response",
    TIMEOUT_CLIENT_MS,
  ),
  simFault(
    "a dropped connection",
    { action: "drop-before" },
    (error) => isBoatTransportError(error) && error.phase === "response",
  ),
  proxyFault(404),
  proxyFault(410),
  simFault(
    "404 with an envelope but not boat.dev's not_found",
    { action: "fail-before", status: 404, code: "route_not_found" },
    apiError(404, "route_not_found"),
  ),
];

async function failure(label: string, promise: Promise<unknown>): Promise<unknown> {
  let result: unknown;
  try {
    result = await promise;
  } catch (error) {
    return error;
  }
  throw new Error(`${label}: expected the provider's failure, but it succeeded: ${JSON.stringify(result)}`);
}

/** What boat.dev holds for the scenario's Boats, and what was ever sent that changes something. */
function providerState(ids: readonly string[]) {
  const stats = sim.stats();
  return {
    boats: sim
      .sandboxes()
      .filter((boat) => ids.includes(boat.id))
      .map((boat) => ({ id: boat.id, name: boat.name, deleted: boat.deletedAt })),
    deleteRequests: stats.deleteRequests,
    createRequests: stats.createRequests,
  };
}

describe("boat recovery: a provider answer that proves nothing is never proof of absence", () => {
  it.each(UNPROVEN)(
    "$name: actions fail with it, journals stay byte for byte, the plan says unknown",
    async (fault) => {
      const s = await scenario(makeClient(fault.timeoutMs));
      const ids = [s.unresolved.boxId, s.resolved.boxId, s.fenced.boxId];
      const journals = s.journals();
      const provider = providerState(ids);

      // Every action that needs proof of absence (or presence) reads the Boat directly; that read fails.
      const actions: [string, string, () => Promise<unknown>][] = [
        ["retireCreate unresolved", s.unresolved.boxId, () => s.recovery.retireCreate(s.unresolved.botId)],
        ["retireCreate resolved", s.resolved.boxId, () => s.recovery.retireCreate(s.resolved.botId)],
        ["retireCreate fenced", s.fenced.boxId, () => s.recovery.retireCreate(s.fenced.botId)],
        [
          "adopt unresolved",
          s.unresolved.boxId,
          () => s.recovery.adopt(s.unresolved.botId, s.unresolved.boxId),
        ],
        ["adopt resolved", s.resolved.boxId, () => s.recovery.adopt(s.resolved.botId, s.resolved.boxId)],
      ];
      for (const [label, boxId, run] of actions) {
        await fault.inject([boxId], 1);
        const error = await failure(label, run());
        expect(isRecoveryError(error), `${label}: ${String(error)}`).toBe(false);
        expect(fault.is(error), `${label}: ${String(error)}`).toBe(true);
        expect(s.journals(), label).toEqual(journals);
      }

      // reconcileDeletion polls nothing (no receipt) and reads the Boat: no proof, so the fence stands,
      // and the read that failed is said as itself (never "pending" for a Boat it could not see).
      await fault.inject([s.fenced.boxId], 1);
      const reconciled = await failure("reconcileDeletion", s.recovery.reconcileDeletion(s.fenced.boxId));
      expect(isRecoveryError(reconciled), String(reconciled)).toBe(false);
      expect(fault.is(reconciled), String(reconciled)).toBe(true);
      expect(s.journals()).toEqual(journals);

      // The plan reads every Boat once: each is unknown, none is gone, and no action is offered on a guess.
      await fault.inject(ids, 3);
      const plan = await s.recovery.plan();
      expect(plan.items.filter((item) => item.kind === "create_boat_gone")).toEqual([]);
      const unresolved = plan.items.find((item) => item.boxId === s.unresolved.boxId);
      expect(unresolved).toMatchObject({
        kind: "create_unresolved",
        facts: { provider: { kind: "unknown" } },
        action: { name: null, command: null },
      });
      const fence = plan.items.find((item) => item.boxId === s.fenced.boxId);
      expect(fence).toMatchObject({
        kind: "deletion_fence",
        facts: { provider: { kind: "unknown" } },
        action: { name: null, command: null },
      });
      expect(plan.items.find((item) => item.boxId === s.resolved.boxId)).toBeUndefined();
      expect(s.journals()).toEqual(journals);

      // Nothing was renamed, deleted or created at boat.dev.
      expect(providerState(ids)).toEqual(provider);

      // With boat.dev answering again the very same plan sees the Boats (the fault was the only reason).
      await control("DELETE", "/_sim/faults");
      proxy = null;
      const healthy = await s.recovery.plan();
      expect(healthy.items.find((item) => item.boxId === s.unresolved.boxId)).toMatchObject({
        kind: "create_unresolved",
        facts: { provider: { kind: "present" } },
        action: { name: "adopt" },
      });
      expect(healthy.items.find((item) => item.boxId === s.fenced.boxId)).toMatchObject({
        facts: { provider: { kind: "present" } },
        action: { name: "retryDeletion" },
      });
    },
  );

  it("boat.dev's own 404 not_found and 410 gone are proof: the plan offers retireCreate and it retires", async () => {
    const s = await scenario(makeClient());
    for (const [status, code, botId, boxId] of [
      [404, "not_found", s.unresolved.botId, s.unresolved.boxId],
      [410, "gone", s.resolved.botId, s.resolved.boxId],
    ] as const) {
      await control("POST", "/_sim/faults", {
        rules: [
          { action: "fail-before", method: "GET", path: `^/sandboxes/${boxId}$`, status, code, times: 2 },
        ],
      });
      const plan = await s.recovery.plan();
      const item = plan.items.find((candidate) => candidate.boxId === boxId)!;
      expect(item).toMatchObject({ kind: "create_boat_gone", action: { name: "retireCreate" } });
      const result = await s.recovery.retireCreate(botId, { expectedState: item.stateDigest });
      expect(result).toMatchObject({ ok: true, action: "retireCreate", boxId, proof: status });
      await control("DELETE", "/_sim/faults");
    }
    const left = JSON.parse(s.journals().creates) as { requests: { botId: string }[] };
    expect(left.requests.map((row) => row.botId)).toEqual([s.fenced.botId]);
  });
});
