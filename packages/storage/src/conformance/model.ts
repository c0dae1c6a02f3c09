import type { BoatCreateRequest } from "@drydock/boat-create-journal";
import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";

/**
 * The reference model of both journals, written once from their READMEs (not from logic.ts, so a bug there
 * shows up as a disagreement): plain arrays in journal order. Every backend must answer exactly as this
 * model does, for every command sequence the suite generates. Limits (4,096 / maxRows) are not reached.
 */

const KEY_RETENTION_MS = 24 * 60 * 60 * 1_000;
const KEY_SAFETY_MARGIN_MS = 60 * 60 * 1_000;

export type Outcome = { ok: true; value: unknown } | { ok: false; code: string; detail: string };
const ok = (value: unknown): Outcome => ({ ok: true, value });
const paused = (detail: string, code: string): Outcome => ({ ok: false, code, detail });
const createFail = (detail: string) => paused(detail, "BOAT_CREATE_PAUSED");
const deleteFail = (detail: string) => paused(detail, "BOAT_DELETE_PAUSED");

const same = (a: BoatCreateRequest, b: BoatCreateRequest) =>
  a.botId === b.botId && a.requestBody === b.requestBody && a.idempotencyKey === b.idempotencyKey;

export class CreateModel {
  rows: BoatCreateRequest[] = [];
  constructor(
    readonly clock: { now: number },
    readonly mint: () => string,
  ) {}

  begin(botId: string, requestBody: string): Outcome {
    const known = this.rows.find((r) => r.botId === botId && r.boxId !== undefined);
    if (known) return ok({ request: { ...known }, startedNow: false });
    const pending = this.rows.find((r) => r.botId === botId);
    if (pending) {
      if (pending.requestBody !== requestBody) {
        return createFail("waiting for an earlier cloud computer request to be reconciled");
      }
      const age = this.clock.now - pending.createdAt;
      if (age >= KEY_RETENTION_MS) return createFail("older than boat.dev's 24-hour retry window");
      if (age >= KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS) {
        return createFail("too close to the end of boat.dev's 24-hour retry window");
      }
      return ok({ request: { ...pending }, startedNow: false });
    }
    const row = { botId, requestBody, idempotencyKey: this.mint(), createdAt: this.clock.now };
    this.rows.push(row);
    return ok({ request: { ...row }, startedNow: true });
  }

  remember(held: BoatCreateRequest, boxId: string): Outcome {
    const current = this.rows.find((r) => same(r, held));
    if (!current || (current.boxId !== undefined && current.boxId !== boxId))
      return createFail("out of date");
    const completed = { ...current, boxId };
    this.rows = [...this.rows.filter((r) => r.botId !== held.botId), completed];
    return ok({ ...completed });
  }

  resolve(held: BoatCreateRequest): Outcome {
    const index = this.rows.findIndex((r) => same(r, held) && r.boxId === held.boxId);
    const current = this.rows[index];
    if (current?.boxId === undefined) return createFail("out of date");
    const resolved = { ...current, resolved: true as const };
    this.rows[index] = resolved;
    return ok({ ...resolved });
  }

  discard(held: BoatCreateRequest): Outcome {
    const current = this.rows.find((r) => r.idempotencyKey === held.idempotencyKey);
    if (current === undefined) return ok(undefined);
    if (!same(current, held) || current.boxId !== held.boxId) return createFail("out of date");
    this.rows = this.rows.filter((r) => r !== current);
    return ok(undefined);
  }

  adopt(botId: string, boxId: string): Outcome {
    const sameBoat = this.rows.find((r) => r.boxId === boxId);
    if (sameBoat && sameBoat.botId !== botId) {
      return createFail("conflicted with another bot's remembered cloud computer");
    }
    const own = this.rows.filter((r) => r.botId === botId);
    if (own.length === 1 && sameBoat?.resolved === true) return ok(undefined);
    const adopted: BoatCreateRequest = sameBoat
      ? { ...sameBoat, resolved: true }
      : {
          botId,
          requestBody: JSON.stringify({ adopted: "legacy-name", boxId }),
          idempotencyKey: this.mint(),
          createdAt: this.clock.now,
          boxId,
          resolved: true,
        };
    this.rows = [...this.rows.filter((r) => r.botId !== botId), adopted];
    return ok(undefined);
  }

  retire(boxId: string): Outcome {
    this.rows = this.rows.filter((r) => r.boxId !== boxId);
    return ok(undefined);
  }

  snapshot(botId?: string): Outcome {
    return ok(
      this.rows
        .filter((r) => botId === undefined || r.botId === botId)
        .map((r) => ({
          botId: r.botId,
          ...(r.boxId !== undefined ? { boxId: r.boxId } : {}),
          resolved: r.resolved === true,
          createdAt: r.createdAt,
          ageMs: Math.max(0, this.clock.now - r.createdAt),
        })),
    );
  }
}

export interface Identity {
  boxId: string;
  name: string;
  ownerBotId: string | null;
}
export interface Receipt {
  id: string;
  kind: "sandbox";
  targetId: string;
  status: "pending" | "processing" | "blocked" | "completed";
}
const RANK = { pending: 0, processing: 1, completed: 2 } as const;

export class DeleteModel {
  rows: BoatDeletionRecord[] = [];
  constructor(readonly clock: { now: number }) {}

  prepare(identity: Identity): Outcome {
    const existing = this.rows.find((r) => r.boxId === identity.boxId);
    if (existing) {
      if (existing.name !== identity.name || existing.ownerBotId !== identity.ownerBotId) {
        return deleteFail("conflicted with the remembered deletion target");
      }
      if (existing.phase !== "blocked") return ok({ record: { ...existing }, prepared: false });
    }
    const now = this.clock.now;
    const prepared: BoatDeletionRecord = { ...identity, phase: "prepared", requestedAt: now, updatedAt: now };
    this.rows = [...this.rows.filter((r) => r.boxId !== identity.boxId), prepared];
    return ok({ record: { ...prepared }, prepared: true });
  }

  private conflict(boxId: string, receipt: Receipt, existing: BoatDeletionRecord): boolean {
    if (existing.operationId !== undefined && existing.operationId !== receipt.id) return true;
    return this.rows.some((r) => r.boxId !== boxId && r.operationId === receipt.id);
  }

  accept(boxId: string, receipt: Receipt): Outcome {
    if (receipt.status === "blocked") throw new Error("accept takes a status other than blocked");
    const index = this.rows.findIndex((r) => r.boxId === boxId);
    const existing = this.rows[index];
    if (!existing || existing.phase === "blocked") return deleteFail("out of date");
    if (this.conflict(boxId, receipt, existing))
      return deleteFail("conflicted with another deletion operation");
    if (
      existing.phase === "accepted" &&
      existing.status !== undefined &&
      existing.status !== "blocked" &&
      RANK[receipt.status] < RANK[existing.status]
    ) {
      return ok({ ...existing });
    }
    const accepted: BoatDeletionRecord = {
      ...existing,
      phase: "accepted",
      operationId: receipt.id,
      status: receipt.status,
      updatedAt: Math.max(this.clock.now, existing.updatedAt),
    };
    this.rows[index] = accepted;
    return ok({ ...accepted });
  }

  block(boxId: string, receipt: Receipt | null): Outcome {
    const index = this.rows.findIndex((r) => r.boxId === boxId);
    const existing = this.rows[index];
    if (!existing) return deleteFail("out of date");
    if (receipt && this.conflict(boxId, receipt, existing)) {
      return deleteFail("conflicted with another deletion operation");
    }
    if (existing.phase === "accepted" && existing.status === "completed") return ok({ ...existing });
    const operationId = receipt?.id ?? existing.operationId;
    const blocked: BoatDeletionRecord = {
      ...existing,
      phase: "blocked",
      ...(operationId !== undefined ? { operationId } : {}),
      status: "blocked",
      updatedAt: Math.max(this.clock.now, existing.updatedAt),
    };
    this.rows[index] = blocked;
    return ok({ ...blocked });
  }

  retire(boxId: string): Outcome {
    this.rows = this.rows.filter((r) => r.boxId !== boxId);
    return ok(undefined);
  }

  get(boxId: string): Outcome {
    const found = this.rows.find((r) => r.boxId === boxId);
    return ok(found ? { ...found } : null);
  }

  hasPending(botId: string): Outcome {
    return ok(this.rows.some((r) => r.ownerBotId === botId));
  }
}
