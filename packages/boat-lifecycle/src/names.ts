import { createHash } from "node:crypto";

/**
 * Deterministic Boat names. boat.dev has no find-by-name endpoint and no client-chosen ids, so the name
 * is how a Boat is found again after its create response was lost or its journal row retired:
 *
 *   ogb-<sha256(environmentId)[0:12]>-<slug(botId)>-<sha256(botId)[0:6]>
 *
 * The scope part keeps two installations that share one boat.dev account from adopting each other's
 * Boats. The legacy form (no scope part) was written before scoping existed; it is still recognised, and
 * a Boat found under it is adopted into the create journal.
 */
const PREFIX = "ogb-";

function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** First 8 characters of the bot id, lower-cased, with everything outside [a-z0-9] stripped; "bot" if empty. */
export function botSlug(botId: string): string {
  return (
    botId
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "")
      .slice(0, 8) || "bot"
  );
}

export function environmentScope(environmentId: string): string {
  return sha256Hex(environmentId).slice(0, 12);
}

export function scopedBoatName(environmentId: string, botId: string): string {
  return `${PREFIX}${environmentScope(environmentId)}-${botSlug(botId)}-${sha256Hex(botId).slice(0, 6)}`;
}

export function legacyBoatName(botId: string): string {
  return `${PREFIX}${botSlug(botId)}-${sha256Hex(botId).slice(0, 6)}`;
}

const SCOPED_SHAPE = /^ogb-([0-9a-f]{12})-([a-z0-9]{1,8})-([0-9a-f]{6})$/;
const LEGACY_SHAPE = /^ogb-([a-z0-9]{1,8})-([0-9a-f]{6})$/;

export type NameKind = "scoped" | "legacy" | "foreign";

/**
 * How a provider name relates to this installation without knowing the bot: `scoped` carries this
 * installation's scope, `legacy` has the pre-scope shape (it can only be attributed to a bot whose id is
 * known), anything else is `foreign`. A scoped name of another installation is foreign.
 */
export function classifyName(environmentId: string, name: string | null): NameKind {
  if (name === null) return "foreign";
  const scope = scopeOfBoatName(name);
  if (scope !== null) return scope === environmentScope(environmentId) ? "scoped" : "foreign";
  // Slugs never contain '-', so a scoped name (three parts) can never match the legacy shape (two parts).
  return LEGACY_SHAPE.test(name) ? "legacy" : "foreign";
}

/** The installation scope a scoped Boat name carries (12 hex), or null for a legacy or foreign name. */
export function scopeOfBoatName(name: string): string | null {
  return SCOPED_SHAPE.exec(name)?.[1] ?? null;
}
