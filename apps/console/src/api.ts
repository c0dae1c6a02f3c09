/**
 * The console's typed client: the only file that knows the server's routes and their shapes. Every type is
 * derived from the bot server's own code (the zod schemas of the fenced-action routes, and the return types
 * of the read routes' functions), type-only, so nothing of the server is bundled. When the server's OpenAPI
 * document lands, switching to types generated from it changes this file only.
 */
import type { BotView, ComputerView } from "../../bot-server/src/domain/computer-view.js";
import type { sagaView } from "../../bot-server/src/domain/restores.js";
import type { recoveryReport } from "../../bot-server/src/recovery-report.js";
import type * as Locks from "../../bot-server/src/routes/locks.js";
import type * as Actions from "../../bot-server/src/routes/recovery-actions.js";

/** What a zod 4 schema parses to / accepts, without importing zod. */
type Out<S> = S extends { _zod: { output: infer O } } ? O : never;
type In<S> = S extends { _zod: { input: infer I } } ? I : never;

export type RecoveryReport = Awaited<ReturnType<typeof recoveryReport>>;
export type RestoreItem = RecoveryReport["restores"][number];
export type BoatItem = RecoveryReport["boats"][number];
export type Bot = BotView & { computer: ComputerView };
export type RestoreView = ReturnType<typeof sagaView>;
export type Readiness = { ok: boolean; checks: Record<string, { ok: boolean; message?: string }> };

export type RestoreDetail = Out<typeof Actions.RestoreDetailResponse>;
export type RestoreActionName = Out<typeof Actions.RestoreActionParams>["action"];
export type RestoreActionPreview = Out<typeof Actions.RestoreActionPreviewResponse>;
export type RestoreActionBody = In<typeof Actions.RestoreActionBody>;
export type RestoreActionResult = Out<typeof Actions.RestoreActionApplyResponse>;
export type BoatActionName = Out<typeof Actions.BoatActionParams>["action"];
export type BoatTarget = Out<typeof Actions.BoatTarget>;
export type BoatActionPreview = Out<typeof Actions.BoatActionPreviewResponse>;
export type BoatActionBody = In<typeof Actions.BoatActionBody>;
export type BoatActionResult = Out<typeof Actions.BoatActionApplyResponse>;
export type ErrorBody = Out<typeof Actions.ErrorResponse>;
export type LockRow = Out<typeof Locks.LockRowSchema>;
export type LocksGcPreview = Out<typeof Actions.LocksGcPreviewResponse>;
export type LocksGcResult = Out<typeof Actions.LocksGcApplyResponse>;
export type PurgePreview = Out<typeof Actions.PurgePreviewResponse>;
export type PurgeBody = In<typeof Actions.PurgeBody>;
export type PurgeResult = Out<typeof Actions.PurgeApplyResponse>;

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
  bots(): Promise<{ ok: true; bots: Bot[] }>;
  recovery(): Promise<RecoveryReport>;
  readiness(): Promise<Readiness>;
  restore(operationId: string): Promise<{ ok: true; botId: string; restore: RestoreView }>;
  restoreDetail(operationId: string): Promise<RestoreDetail>;
  previewRestore(operationId: string, action: RestoreActionName): Promise<RestoreActionPreview>;
  applyRestore(
    operationId: string,
    action: RestoreActionName,
    body: RestoreActionBody,
  ): Promise<RestoreActionResult>;
  previewBoat(action: BoatActionName, target: BoatTarget): Promise<BoatActionPreview>;
  applyBoat(action: BoatActionName, body: BoatActionBody): Promise<BoatActionResult>;
  locks(): Promise<{ ok: true; locks: LockRow[] }>;
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
        const page: { bots: Bot[]; nextCursor?: string | null } = await call("GET", `/v1/bots${query}`);
        all.push(...page.bots);
        cursor = page.nextCursor ?? null;
      } while (cursor !== null);
      return { ok: true, bots: all };
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
