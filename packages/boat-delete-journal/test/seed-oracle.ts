/**
 * Test oracle: the load-time validation of the journal file exactly as the original system (seed 001)
 * performs it, restated independently of this package's zod schema. A file drydock writes must pass it, and
 * a file it accepts must be accepted by drydock (and the other way round).
 */
const BOT = /^[A-Za-z0-9_-]{1,120}$/;
const BOAT = /^bx_[23456789abcdefghjkmnpqrstuvwxyz]{8}$/;
const OPERATION = /^bdop_[a-f0-9]{32}$/;
const STATUSES = new Set(["pending", "processing", "blocked", "completed"]);

const validTimestamp = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v > 0;
const validName = (v: unknown): boolean =>
  typeof v === "string" && v.length > 0 && v.length <= 100 && !/[\r\n\0]/.test(v);

function seedIsRecord(value: unknown): boolean {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const r = value as Record<string, unknown>;
  if (
    typeof r.boxId !== "string" ||
    !BOAT.test(r.boxId) ||
    !validName(r.name) ||
    !(r.ownerBotId === null || (typeof r.ownerBotId === "string" && BOT.test(r.ownerBotId))) ||
    !["prepared", "accepted", "blocked"].includes(r.phase as string) ||
    !validTimestamp(r.requestedAt) ||
    !validTimestamp(r.updatedAt) ||
    r.updatedAt < r.requestedAt ||
    !(r.operationId === undefined || (typeof r.operationId === "string" && OPERATION.test(r.operationId))) ||
    !(r.status === undefined || (typeof r.status === "string" && STATUSES.has(r.status)))
  ) {
    return false;
  }
  if (r.phase === "prepared") return r.operationId === undefined && r.status === undefined;
  if (r.phase === "accepted") {
    return (
      typeof r.operationId === "string" &&
      (r.status === "pending" || r.status === "processing" || r.status === "completed")
    );
  }
  return r.status === "blocked";
}

/** "ok", "unreadable" (not JSON) or "invalid", as the seed's loadFresh decides for file text. */
export function seedVerdict(text: string): "ok" | "unreadable" | "invalid" {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return "unreadable";
  }
  const journal = raw as { version?: unknown; records?: unknown };
  if (
    !journal ||
    typeof journal !== "object" ||
    Array.isArray(journal) ||
    journal.version !== 1 ||
    !Array.isArray(journal.records) ||
    journal.records.length > 4_096 ||
    !journal.records.every(seedIsRecord)
  ) {
    return "invalid";
  }
  const boats = new Set<string>();
  const operations = new Set<string>();
  for (const r of journal.records as Record<string, string>[]) {
    if (boats.has(r.boxId!)) return "invalid";
    boats.add(r.boxId!);
    if (r.operationId) {
      if (operations.has(r.operationId)) return "invalid";
      operations.add(r.operationId);
    }
  }
  return "ok";
}

/** The seed's writer: `JSON.stringify(..., null, 2)` plus a newline. */
export function seedSerialize(records: unknown[]): string {
  return `${JSON.stringify({ version: 1, records }, null, 2)}\n`;
}
