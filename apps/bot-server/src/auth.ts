import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";

/** What a bearer token may do: `admin` everything, `read` every GET (and HEAD) and nothing else. */
export type Role = "admin" | "read";
export const ROLES: readonly Role[] = ["admin", "read"];

/** One accepted token: a name for the logs (never the token itself) and its role. */
export interface TokenEntry {
  name: string;
  role: Role;
  token: string;
}

/** Who sent a request: the token's name and role. */
export interface Principal {
  name: string;
  role: Role;
}

/** The tokens a server accepts, looked up on every request (a file source re-reads its file when it changes). */
export interface TokenSource {
  lookup(presented: string): Principal | null;
}

const TOKEN_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** Tokens of DRYDOCK_TOKENS and its file: no whitespace, no comma, no colon (the list's separators). */
const LISTED_TOKEN = /^[A-Za-z0-9._~+/=-]{16,512}$/;

export class TokenListError extends Error {
  override readonly name = "TokenListError";
}

/**
 * Parses a token list: entries `name:role:token`, separated by commas or newlines; blank lines and lines
 * starting with `#` are ignored. Names and tokens must be unique; at least one entry.
 */
export function parseTokenList(text: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const lines = text
    .split(/[\n,]/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  for (const [index, line] of lines.entries()) {
    const parts = line.split(":");
    const where = `entry ${index + 1}`;
    if (parts.length !== 3) throw new TokenListError(`${where}: expected name:role:token`);
    const [name, role, token] = parts as [string, string, string];
    if (!TOKEN_NAME.test(name))
      throw new TokenListError(`${where}: the name must be 1-64 of A-Z a-z 0-9 _ . -`);
    if (!ROLES.includes(role as Role))
      throw new TokenListError(`${where} (${name}): role must be admin or read`);
    if (!LISTED_TOKEN.test(token))
      throw new TokenListError(`${where} (${name}): the token must be 16-512 of A-Z a-z 0-9 . _ ~ + / = -`);
    if (entries.some((e) => e.name === name))
      throw new TokenListError(`${where}: name '${name}' appears twice`);
    if (entries.some((e) => e.token === token))
      throw new TokenListError(`${where} (${name}): token appears twice`);
    entries.push({ name, role: role as Role, token });
  }
  if (entries.length === 0) throw new TokenListError("no token in the list");
  return entries;
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * Looks `presented` up among `entries`, comparing SHA-256 digests in constant time and always against every
 * entry, so neither a token's bytes nor its position can be learnt from response timing.
 */
function findEntry(
  entries: readonly { entry: Principal; digest: Buffer }[],
  presented: string,
): Principal | null {
  const given = digest(presented);
  let found: Principal | null = null;
  for (const candidate of entries) {
    if (timingSafeEqual(given, candidate.digest) && found === null) found = candidate.entry;
  }
  return found;
}

function digested(entries: readonly TokenEntry[]) {
  return entries.map((e) => ({ entry: { name: e.name, role: e.role }, digest: digest(e.token) }));
}

/** A fixed set of tokens (DRYDOCK_TOKEN, `<dataDir>/server-token`, DRYDOCK_TOKENS). */
export function staticTokens(entries: readonly TokenEntry[]): TokenSource {
  const list = digested(entries);
  return { lookup: (presented) => findEntry(list, presented) };
}

/**
 * The tokens of DRYDOCK_TOKENS_FILE, re-read whenever the file changes (one `stat` per request: inode, size,
 * mtime and ctime), so tokens rotate without a restart: add the new one, move the clients, remove the old.
 * A file that cannot be read or parsed after a change (half-written by an editor, removed) keeps the last
 * good set, with one warning per change: a typo never locks every client out. The first read happens at
 * start and must succeed (`loadTokenFile`).
 */
export function fileTokens(
  path: string,
  initial: readonly TokenEntry[],
  warn: (message: string) => void,
  fixed: readonly TokenEntry[] = [],
): TokenSource {
  const fixedList = digested(fixed);
  let list = digested(initial);
  let seen = signature(path);
  return {
    lookup(presented) {
      const now = signature(path);
      if (now !== seen) {
        seen = now;
        try {
          list = digested(parseTokenList(readFileSync(path, "utf8")));
        } catch (error) {
          warn(
            `DRYDOCK_TOKENS_FILE could not be used after a change (${(error as Error).message}); the previous tokens stay valid`,
          );
        }
      }
      return findEntry(fixedList, presented) ?? findEntry(list, presented);
    },
  };
}

function signature(path: string): string {
  try {
    const s = statSync(path, { bigint: true });
    return `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
  } catch (error) {
    return `missing:${(error as NodeJS.ErrnoException).code ?? "?"}`;
  }
}

/** `Authorization: Bearer <token>` → the token, or null. */
export function bearerToken(header: string | undefined): string | null {
  if (!header?.startsWith("Bearer ")) return null;
  const token = header.slice(7);
  return token === "" ? null : token;
}

/** Compares a presented token with one expected value in constant time (the metrics token). */
export function sameToken(expected: string, presented: string): boolean {
  return timingSafeEqual(digest(expected), digest(presented));
}
