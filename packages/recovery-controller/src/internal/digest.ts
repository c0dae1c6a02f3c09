import { domainDigest } from "@drydock/restore-saga";

/**
 * `sha256:` + hex over a domain tag, NUL and the canonical JSON of `value` (restore-saga's digest scheme).
 * Plan facts are gathered with optional fields; the JSON round trip drops `undefined` members first, which
 * the saga's canonical form refuses (it never hashes a value that would not survive being written).
 */
export function digestOf(domain: string, value: unknown): string {
  return domainDigest(domain, JSON.parse(JSON.stringify(value ?? null)));
}
