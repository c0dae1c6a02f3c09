import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";

/** The console's URL path: the page and its assets (apps/console, built with `base: "/console/"`). */
export const CONSOLE_PATH = "/console/";

const HERE = dirname(fileURLToPath(import.meta.url));

/**
 * Where the built console is: inside this package's dist (`dist/console`, copied there by the build, so
 * `pnpm start` and an installed server serve it with no extra step). Running from sources (tests, `pnpm
 * dev`), apps/console's own build comes first, so a fresh `vite build` is what is served, never an older
 * copy in dist. Null when it was never built.
 */
export function consoleAssetsDir(): string | null {
  const fromSources = basename(HERE) === "routes";
  const candidates = fromSources
    ? [join(HERE, "..", "..", "..", "console", "dist"), join(HERE, "..", "..", "dist", "console")]
    : [join(HERE, "console")]; // dist/main.js: tsup bundles the server into one file beside dist/console
  return candidates.find((dir) => existsSync(join(dir, "index.html"))) ?? null;
}

/**
 * GET /console/: the operator console. The page and its assets hold no data and no secret (the page asks
 * for the token and sends it with every API call, which the app's auth hook checks), so they are served
 * without a token: a browser cannot send one with a plain navigation. Strict headers: nothing but this
 * origin's scripts, styles and API, and never framed.
 */
export const consoleRoutes: FastifyPluginAsyncZod<ServerContext> = async (app) => {
  const root = consoleAssetsDir();
  // The page is not part of the API: its routes stay out of the OpenAPI document (@fastify/static hides its own).
  app.get("/console", { schema: { hide: true } }, async (_request, reply) =>
    reply.redirect(CONSOLE_PATH, 308),
  );
  if (root === null) {
    app.get("/console/*", { schema: { hide: true } }, async () => {
      throw new HttpProblem(
        404,
        "console_not_built",
        "The console was not built into this server: run `pnpm build` (turbo builds apps/console first).",
      );
    });
    return;
  }
  await app.register(fastifyStatic, {
    root,
    prefix: CONSOLE_PATH,
    index: ["index.html"],
    wildcard: true,
    // Hashed asset names never change content; the page itself is revalidated.
    setHeaders(reply, path) {
      reply.header(
        "content-security-policy",
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
      );
      reply.header("x-content-type-options", "nosniff");
      reply.header("referrer-policy", "no-referrer");
      reply.header(
        "cache-control",
        path.endsWith("index.html") ? "no-cache" : "public, max-age=31536000, immutable",
      );
    },
  });
};
