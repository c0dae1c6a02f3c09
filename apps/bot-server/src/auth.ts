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

/** Tokens of DRYDOCK_TOKENS are at most 512 characters; a table is at least this wide. */
const MIN_TABLE_WIDTH = 512;

/**
 * Accepted tokens laid out for a constant-time lookup: each one's bytes zero-padded to one width (the longest
 * token, at least 512 bytes). A presented token is padded the same way into a scratch buffer and compared with
 * every entry by `timingSafeEqual` over the whole width, and its byte length compared as a number. So the time
 * a lookup takes depends neither on a token's bytes, nor on its length, nor on its position. A presented token
 * longer than the width matches nothing, and that is all its timing shows (its length is the caller's own).
 * Hashing both sides with SHA-256 gave the same guarantee, but ran OpenSSL's hash on every request, a
 * measurable part of a cheap GET (bench/lib/history.md).
 */
function tokenTable(entries: readonly TokenEntry[]): (presented: string) => Principal | null {
  const width = Math.max(MIN_TABLE_WIDTH, ...entries.map((e) => Buffer.byteLength(e.token)));
  const table = entries.map((e) => {
    const padded = Buffer.alloc(width);
    padded.write(e.token, "utf8");
    return { principal: { name: e.name, role: e.role }, padded, length: Buffer.byteLength(e.token) };
  });
  const scratch = Buffer.alloc(width);
  return (presented) => {
    const length = Buffer.byteLength(presented);
    if (length > width) return null;
    scratch.fill(0);
    scratch.write(presented, "utf8");
    let found: Principal | null = null;
    for (const entry of table) {
      const equal = timingSafeEqual(scratch, entry.padded);
      if (equal && entry.length === length && found === null) found = entry.principal;
    }
    return found;
  };
}

/** A fixed set of tokens (DRYDOCK_TOKEN, `<dataDir>/server-token`, DRYDOCK_TOKENS). */
export function staticTokens(entries: readonly TokenEntry[]): TokenSource {
  return { lookup: tokenTable(entries) };
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
  const fixedTable = tokenTable(fixed);
  let table = tokenTable(initial);
  let seen = signature(path);
  return {
    lookup(presented) {
      const now = signature(path);
      if (now !== seen) {
        seen = now;
        try {
          table = tokenTable(parseTokenList(readFileSync(path, "utf8")));
        } catch (error) {
          warn(
            `DRYDOCK_TOKENS_FILE could not be used after a change (${(error as Error).message}); the previous tokens stay valid`,
          );
        }
      }
      // Both tables, always: which one holds the token must not show in the time taken either.
      const fixedEntry = fixedTable(presented);
      const fileEntry = table(presented);
      return fixedEntry ?? fileEntry;
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
