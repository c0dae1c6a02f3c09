// The release plan: `changeset version` must be able to run at any commit. A changeset that names a private
// package beside a public one, or a package that does not exist, makes changesets refuse the whole plan.
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const run = promisify(execFile);
const root = resolve(dirname(new URL(import.meta.url).pathname), "../../..");

test("the pending changesets form a release plan changesets accepts", async () => {
  const changeset = resolve(root, "node_modules", "@changesets", "cli", "bin.js");
  const result = await run(process.execPath, [changeset, "status"], { cwd: root, timeout: 60_000 }).catch(
    (error) => error,
  );
  expect(`${result.stderr ?? ""}`).not.toMatch(/error/i);
  expect(result.code ?? 0).toBe(0);
});
