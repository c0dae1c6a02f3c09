// Part of the server's build: the operator console (apps/console, built first by turbo) ships inside this
// package as dist/console, so `pnpm start` and an installed `drydock-server` serve it with no extra step.
import { cpSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const app = join(dirname(fileURLToPath(import.meta.url)), "..");
rmSync(join(app, "dist", "console"), { recursive: true, force: true });
cpSync(join(app, "..", "console", "dist"), join(app, "dist", "console"), { recursive: true });
