import { createHash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted recursively (by UTF-16 code unit, as `Array.prototype.sort` does), no
 * whitespace, numbers only when finite. Two equal values always give the same bytes, so a hash over them
 * is a property of the value, not of how a writer happened to order or space it.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("canonical JSON cannot hold a non-finite number");
      // -0 and 0 are the same JSON value; JSON.stringify already prints both as "0".
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map((entry) => canonicalJson(entry)).join(",")}]`;
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError("canonical JSON only holds plain objects");
      }
      const record = value as Record<string, unknown>;
      const parts: string[] = [];
      for (const key of Object.keys(record).sort()) {
        const entry = record[key];
        // An undefined member would silently vanish in JSON.stringify: refuse it instead, so the hashed
        // value and the written value can never differ.
        if (entry === undefined) throw new TypeError(`canonical JSON cannot hold undefined (key ${key})`);
        parts.push(`${JSON.stringify(key)}:${canonicalJson(entry)}`);
      }
      return `{${parts.join(",")}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
  }
}

/** Deep copy of a JSON value with every object's keys in canonical (sorted) order. */
export function sortedJson<T>(value: T): T {
  return JSON.parse(canonicalJson(value)) as T;
}

/** `"sha256:" + hex(sha256(domain + "\0" + canonicalJson(value)))`: the digest scheme of the saga files. */
export function domainDigest(domain: string, value: unknown): string {
  return `sha256:${createHash("sha256")
    .update(`${domain}\0${canonicalJson(value)}`)
    .digest("hex")}`;
}

/** `"sha256:" + hex(sha256(canonicalJson(value)))`, no domain: the workspace lock owner digest. */
export function plainDigest(value: unknown): string {
  return `sha256:${createHash("sha256").update(canonicalJson(value)).digest("hex")}`;
}

export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * The exact bytes a saga file is written as: canonical key order, two-space indentation, one trailing
 * newline. Readers demand this byte-for-byte, so a change to whitespace (which the hash does not cover)
 * is caught as tampering just like a change to a value.
 */
export function prettyCanonical(value: unknown): string {
  return `${JSON.stringify(sortedJson(value), null, 2)}\n`;
}
