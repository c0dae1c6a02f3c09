/**
 * The console's typed client: the only file that knows the server's routes and their shapes. Every type
 * comes from `./generated/openapi.d.ts`, which openapi-typescript generates from the bot server's OpenAPI
 * document (`pnpm --filter @drydock/console gen:api`; test/openapi-types.test.ts fails while it is stale).
 * Type-only: nothing of the server is bundled.
 */
import type { components, paths } from "./generated/openapi.js";

type Method = "get" | "post";
/** The JSON body route `P` answers to `M` with status `S`. */
type Answer<P extends keyof paths, M extends Method, S extends number | string = 200> = paths[P][M] extends {
  responses: { [K in S]: { content: { "application/json": infer J } } };
}
  ? J
  : never;
/** The JSON body route `P` accepts on POST. */
type Body<P extends keyof paths> = paths[P]["post"] extends {
  requestBody?: { content: { "application/json": infer J } };
}
  ? J
  : never;
/** The path parameters of route `P` on `M`. */
type PathParams<P extends keyof paths, M extends Method> = paths[P][M] extends {
  parameters: { path: infer Q };
}
  ? Q
  : never;

type RestoreAction = "/v1/recovery/restores/{operationId}/{action}";
type BoatAction = "/v1/recovery/boats/{action}";

export type RecoveryReport = Answer<"/v1/recovery", "get">;
export type RestoreItem = RecoveryReport["restores"][number];
export type BoatItem = RecoveryReport["boats"][number];
export type BotsAnswer = Answer<"/v1/bots", "get">;
export type Bot = BotsAnswer["bots"][number];
export type RestoreAnswer = Answer<"/v1/restores/{operationId}", "get">;
export type RestoreView = RestoreAnswer["restore"];
export type Readiness = Answer<"/readyz", "get"> | Answer<"/readyz", "get", 503>;

export type RestoreDetail = Answer<"/v1/recovery/restores/{operationId}", "get">;
export type RestoreActionName = PathParams<RestoreAction, "get">["action"];
export type RestoreActionPreview = Answer<RestoreAction, "get">;
export type RestoreActionBody = Body<RestoreAction>;
export type RestoreActionResult = Answer<RestoreAction, "post">;
export type BoatActionName = PathParams<BoatAction, "get">["action"];
export type BoatTarget = NonNullable<paths[BoatAction]["get"]["parameters"]["query"]>;
export type BoatActionPreview = Answer<BoatAction, "get">;
export type BoatActionBody = Body<BoatAction>;
export type BoatActionResult = Answer<BoatAction, "post">;
export type ErrorBody = components["schemas"]["ErrorBody"];
export type LocksAnswer = Answer<"/v1/locks", "get">;
export type LockRow = LocksAnswer["locks"][number];
export type LocksGcPreview = Answer<"/v1/recovery/locks/gc", "get">;
export type LocksGcResult = Answer<"/v1/recovery/locks/gc", "post">;
export type PurgePreview = Answer<"/v1/recovery/restores/purge", "get">;
export type PurgeBody = Body<"/v1/recovery/restores/purge">;
export type PurgeResult = Answer<"/v1/recovery/restores/purge", "post">;

/** A refusal of the server: its status, its lower-snake-case code and its plain-language message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export interface Api {
  bots(): Promise<BotsAnswer>;
  recovery(): Promise<RecoveryReport>;
  readiness(): Promise<Readiness>;
  restore(operationId: string): Promise<RestoreAnswer>;
  restoreDetail(operationId: string): Promise<RestoreDetail>;
  previewRestore(operationId: string, action: RestoreActionName): Promise<RestoreActionPreview>;
  applyRestore(
    operationId: string,
    action: RestoreActionName,
    body: RestoreActionBody,
  ): Promise<RestoreActionResult>;
  previewBoat(action: BoatActionName, target: BoatTarget): Promise<BoatActionPreview>;
  applyBoat(action: BoatActionName, body: BoatActionBody): Promise<BoatActionResult>;
  locks(): Promise<LocksAnswer>;
  previewLocksGc(): Promise<LocksGcPreview>;
  applyLocksGc(): Promise<LocksGcResult>;
  previewPurge(olderThanDays: number): Promise<PurgePreview>;
  applyPurge(body: PurgeBody): Promise<PurgeResult>;
}

export function createApi(token: string, base = ""): Api {
  async function call<T>(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    accept?: number[],
  ): Promise<T> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON: reported below
    }
    if (response.ok || accept?.includes(response.status)) return json as T;
    const error = (json as ErrorBody | null)?.error;
    throw new ApiError(
      response.status,
      error?.code ?? "http_error",
      error?.message ?? `The server answered ${response.status}.`,
      error?.details,
    );
  }
  const id = encodeURIComponent;
  return {
    // GET /v1/bots answers one page at a time: follow nextCursor so the console still shows every bot.
    bots: async () => {
      const all: Bot[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor === null ? "?limit=500" : `?limit=500&cursor=${id(cursor)}`;
        const page: BotsAnswer = await call("GET", `/v1/bots${query}`);
        all.push(...page.bots);
        cursor = page.nextCursor;
      } while (cursor !== null);
      // Every page followed: the answer holds all bots, so there is no next page.
      return { ok: true, bots: all, nextCursor: null };
    },
    recovery: () => call("GET", "/v1/recovery"),
    // 503 is an answer here: not ready, with the checks that failed.
    readiness: () => call("GET", "/readyz", undefined, [503]),
    restore: (operationId) => call("GET", `/v1/restores/${id(operationId)}`),
    restoreDetail: (operationId) => call("GET", `/v1/recovery/restores/${id(operationId)}`),
    previewRestore: (operationId, action) =>
      call("GET", `/v1/recovery/restores/${id(operationId)}/${action}`),
    applyRestore: (operationId, action, body) =>
      call("POST", `/v1/recovery/restores/${id(operationId)}/${action}`, body),
    previewBoat: (action, target) => {
      const query = new URLSearchParams();
      if (target.botId) query.set("botId", target.botId);
      if (target.boxId) query.set("boxId", target.boxId);
      return call("GET", `/v1/recovery/boats/${action}?${query}`);
    },
    applyBoat: (action, body) => call("POST", `/v1/recovery/boats/${action}`, body),
    locks: () => call("GET", "/v1/locks"),
    previewLocksGc: () => call("GET", "/v1/recovery/locks/gc"),
    applyLocksGc: () => call("POST", "/v1/recovery/locks/gc", { confirm: true }),
    previewPurge: (olderThanDays) =>
      call("GET", `/v1/recovery/restores/purge?olderThanDays=${olderThanDays}`),
    applyPurge: (body) => call("POST", "/v1/recovery/restores/purge", body),
  };
}
