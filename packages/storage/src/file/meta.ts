import { randomBytes } from "node:crypto";
import { promises as fsp } from "node:fs";
import { join } from "node:path";
import type { MetaStore } from "../contract.js";
import { corruptFailure, osCauseOf, osFailure, StorageError } from "../errors.js";
import { assertMetaKey, META_KEY, META_VALUE, mintedValue, NOT_META_FILES } from "../meta-rules.js";

/**
 * Meta singletons as the seeds keep `environment-id`: one file `<dataDir>/<key>` holding `value\n`, 0600,
 * created once with link(2) (which fails with EEXIST when another process got there first), never replaced.
 */
export function openFileMeta(dataDir: string): MetaStore & { all(): Promise<Record<string, string>> } {
  async function read(key: string): Promise<string | null> {
    const path = join(dataDir, key);
    let raw: string;
    try {
      raw = await fsp.readFile(path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw osOrUnknown(error, path);
    }
    const value = raw.trim();
    // Never regenerated: a new environment id would rename every Boat this installation owns.
    if (!META_VALUE.test(value)) throw corruptFailure(path, "not a valid value");
    return value;
  }

  return {
    async get(key) {
      assertMetaKey(key);
      return read(key);
    },
    async getOrCreate(key, mint) {
      assertMetaKey(key);
      const existing = await read(key);
      if (existing !== null) return existing;
      const value = mintedValue(key, mint);
      const path = join(dataDir, key);
      try {
        await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
        await createOnce(path, value);
      } catch (error) {
        throw osOrUnknown(error, path);
      }
      return (await read(key)) as string;
    },
    async all() {
      let names: string[];
      try {
        names = await fsp.readdir(dataDir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
        throw osOrUnknown(error, dataDir);
      }
      const out: Record<string, string> = {};
      for (const name of names.filter((n) => META_KEY.test(n) && !NOT_META_FILES.has(n)).sort()) {
        const stat = await fsp.lstat(join(dataDir, name));
        if (!stat.isFile()) continue;
        const value = await read(name);
        if (value !== null) out[name] = value;
      }
      return out;
    },
  };
}

export function osOrUnknown(error: unknown, path: string): unknown {
  const errno = osCauseOf(error);
  if (errno !== undefined) return osFailure(errno, path, error);
  if (error instanceof StorageError) return error;
  return error;
}

/** Writes `value\n` to `path` (0600) unless it exists: first writer wins, durably (link(2), then the dir's fsync). */
export async function createOnce(path: string, value: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await fsp.open(tmp, "wx", 0o600);
  try {
    await handle.writeFile(`${value}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fsp.link(tmp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    await fsp.unlink(tmp);
  }
  const dir = await fsp.open(join(path, ".."), "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
