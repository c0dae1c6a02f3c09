import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(HERE, "..", "..", "..");

/**
 * Before the browser suite: Debian's chromium (installed by the project's own script when missing and
 * root; a thrown error, so a failed suite, otherwise) and a fresh build of the page, so the server under
 * test serves this very source.
 */
export default function setup(): void {
  execFileSync("sh", [join(REPO_ROOT, "scripts", "ensure-chromium.sh")], { stdio: "inherit" });
  execFileSync(
    process.execPath,
    [join(HERE, "..", "node_modules", "vite", "bin", "vite.js"), "build", "--logLevel", "warn"],
    {
      cwd: join(HERE, ".."),
      stdio: "inherit",
    },
  );
}
