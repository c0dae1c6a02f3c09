/**
 * Test oracle: the load-time validation of the journal file exactly as the original system (seed 000)
 * performs it, restated independently of this package's zod schema. A file drydock writes must pass it, and
 * a file it accepts must be accepted by drydock (and the other way round).
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const BOT = /^[A-Za-z0-9_-]{1,120}$/;
const BOAT = /^bx_[23456789abcdefghjkmnpqrstuvwxyz]{8}$/;

function seedIsRequest(value: unknown): boolean {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const r = value as Record<string, unknown>;
  return (
    typeof r.botId === "string" &&
    BOT.test(r.botId) &&
    typeof r.requestBody === "string" &&
    r.requestBody.length > 0 &&
    r.requestBody.length <= 1_024 &&
    typeof r.idempotencyKey === "string" &&
    UUID.test(r.idempotencyKey) &&
    typeof r.createdAt === "number" &&
    Number.isFinite(r.createdAt) &&
    r.createdAt > 0 &&
    (r.boxId === undefined || (typeof r.boxId === "string" && BOAT.test(r.boxId))) &&
    (r.resolved === undefined || (r.resolved === true && typeof r.boxId === "string"))
  );
}

/** "ok", "unreadable" (not JSON) or "invalid", as the seed's loadFresh decides for file text. */
export function seedVerdict(text: string): "ok" | "unreadable" | "invalid" {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return "unreadable";
  }
  const file = raw as { version?: unknown; requests?: unknown };
  if (
    !file ||
    typeof file !== "object" ||
    Array.isArray(file) ||
    file.version !== 1 ||
    !Array.isArray(file.requests) ||
    file.requests.length > 4_096 ||
    !file.requests.every(seedIsRequest)
  ) {
    return "invalid";
  }
  const identities = new Set<string>();
  const keys = new Set<string>();
  const bots = new Set<string>();
  for (const r of file.requests as Record<string, string>[]) {
    const identity = `${r.botId}\0${r.requestBody}`;
    if (identities.has(identity) || keys.has(r.idempotencyKey!)) return "invalid";
    if (r.boxId && bots.has(r.botId!)) return "invalid";
    identities.add(identity);
    keys.add(r.idempotencyKey!);
    if (r.boxId) bots.add(r.botId!);
  }
  return "ok";
}

/** The seed's writer: `JSON.stringify(..., null, 2)` plus a newline. */
export function seedSerialize(requests: unknown[]): string {
  return `${JSON.stringify({ version: 1, requests }, null, 2)}\n`;
}
