import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fileTokens, staticTokens, type TokenEntry } from "../src/auth.js";

const ADMIN = "a".repeat(20) + "Admin-Token_0123456789";
const READER = "r".repeat(20) + "Reader-Token_0123456789";
const entries: TokenEntry[] = [
  { name: "ops", role: "admin", token: ADMIN },
  { name: "dash", role: "read", token: READER },
];

describe("token lookup: only the exact bytes of an accepted token match", () => {
  const lookup = staticTokens(entries).lookup;

  it("each accepted token finds its own name and role", () => {
    expect(lookup(ADMIN)).toEqual({ name: "ops", role: "admin" });
    expect(lookup(READER)).toEqual({ name: "dash", role: "read" });
  });

  it("a prefix, an extension, a trailing NUL, one changed byte, another case, non-ASCII or a huge value match nothing", () => {
    for (const presented of [
      ADMIN.slice(0, -1),
      `${ADMIN}x`,
      `${ADMIN}\u0000`,
      `${ADMIN.slice(0, -1)}8`,
      ADMIN.toUpperCase(),
      `${ADMIN.slice(0, -1)}é`,
      "",
      "x".repeat(10_000),
      READER.slice(0, ADMIN.length),
    ]) {
      expect(lookup(presented), JSON.stringify(presented.slice(0, 60))).toBeNull();
    }
  });

  it("a token longer than the table's usual width (a long DRYDOCK_TOKEN) still matches exactly", () => {
    const long = "L".repeat(700);
    const table = staticTokens([{ name: "default", role: "admin", token: long }]).lookup;
    expect(table(long)).toEqual({ name: "default", role: "admin" });
    expect(table(long.slice(0, 699))).toBeNull();
    expect(table(`${long}L`)).toBeNull();
  });
});

describe("a token file's table", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("answers the fixed tokens and the file's, and follows the file when it changes", () => {
    const dir = mkdtempSync(join(tmpdir(), "drydock-auth-"));
    dirs.push(dir);
    const path = join(dir, "tokens");
    writeFileSync(path, `dash:read:${READER}\n`);
    const warnings: string[] = [];
    const source = fileTokens(
      path,
      [{ name: "dash", role: "read", token: READER }],
      (w) => warnings.push(w),
      [{ name: "default", role: "admin", token: ADMIN }],
    );
    expect(source.lookup(ADMIN)).toEqual({ name: "default", role: "admin" });
    expect(source.lookup(READER)).toEqual({ name: "dash", role: "read" });
    const rotated = `n${READER.slice(1)}`;
    writeFileSync(path, `dash2:read:${rotated}\n`);
    expect(source.lookup(READER)).toBeNull();
    expect(source.lookup(rotated)).toEqual({ name: "dash2", role: "read" });
    expect(warnings).toEqual([]);
  });
});
