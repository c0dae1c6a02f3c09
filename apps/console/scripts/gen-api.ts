/**
 * The console's client types, generated from the bot server's OpenAPI document: the server is started
 * in-process (on sources, 127.0.0.1:0, a throwaway data directory), its /openapi.json is read and turned
 * into `src/generated/openapi.d.ts` by openapi-typescript. Run `pnpm --filter @drydock/console gen:api`
 * after a route changes; test/openapi-types.test.ts fails while the committed file is stale.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";
import { loadConfig } from "../../bot-server/src/config.js";
import { startServer } from "../../bot-server/src/server.js";

export const GENERATED = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "src",
  "generated",
  "openapi.d.ts",
);
export const GEN_COMMAND = "pnpm --filter @drydock/console gen:api";

const HEADER = `/**
 * GENERATED from the bot server's OpenAPI document by openapi-typescript: do not edit.
 * Regenerate with \`${GEN_COMMAND}\`.
 */

`;

/** The OpenAPI document the server serves now. */
export async function serverDocument(): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), "drydock-gen-api-"));
  const running = await startServer(
    loadConfig({ DRYDOCK_DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" }),
    { print: () => {} },
  );
  try {
    await running.startup;
    const response = await fetch(`${running.url}/openapi.json`);
    if (!response.ok) throw new Error(`GET /openapi.json answered ${response.status}`);
    return await response.json();
  } finally {
    await running.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The text of `src/generated/openapi.d.ts` for the server as it is now. */
export async function generatedTypes(): Promise<string> {
  const ast = await openapiTS((await serverDocument()) as Parameters<typeof openapiTS>[0]);
  // Formatted as the repo's biome formats it, so the committed file passes `biome check` and compares equal.
  const biome = spawnSync("pnpm", ["exec", "biome", "format", `--stdin-file-path=${GENERATED}`], {
    input: HEADER + astToString(ast),
    encoding: "utf8",
  });
  if (biome.status !== 0) throw new Error(`biome format failed: ${biome.stderr}`);
  return biome.stdout;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(GENERATED, await generatedTypes());
  console.log(`wrote ${GENERATED}`);
}
