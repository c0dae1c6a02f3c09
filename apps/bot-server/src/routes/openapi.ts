import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import {
  createJsonSchemaTransform,
  type FastifyPluginAsyncZod,
  jsonSchemaTransformObject,
} from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { serverVersion } from "../metrics.js";
import { answers } from "./schemas.js";

/** Where the OpenAPI document's page is (Swagger UI, its assets served from its npm package). */
export const DOCS_PREFIX = "/docs";

/** Where the operator console's page and assets are (they hold no data: the page asks for a token). */
export const CONSOLE_PREFIX = "/console";

/**
 * Routes anyone on the listening address may call: probes, the API's description and its page, and the
 * console's static page (every call the console makes goes to the API, with the token the person typed).
 */
const PUBLIC_ROUTES = new Set(["/healthz", "/readyz", "/openapi.json"]);
const PUBLIC_PREFIXES = [DOCS_PREFIX, CONSOLE_PREFIX];

export function isPublicRoute(route: string): boolean {
  return (
    PUBLIC_ROUTES.has(route) ||
    PUBLIC_PREFIXES.some((prefix) => route === prefix || route.startsWith(`${prefix}/`))
  );
}

/**
 * @fastify/swagger, fed by every route's zod schemas (fastify-type-provider-zod's transform), and the docs
 * page at /docs. Registered before the routes, whose onRoute hook it needs to see them.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "drydock bot server",
        description:
          "Bots, their cloud computers (Boats at boat.dev), workspaces, checkpoints and restores. Every error answers `{ ok: false, error: { code, message, requestId, details? } }`.",
        version: serverVersion(),
      },
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      },
      security: [{ bearer: [] }],
    },
    transform: createJsonSchemaTransform({ skipList: [] }),
    // Schemas with a registry id (the shared ErrorBody) become components the routes refer to.
    transformObject: (input) => namedWildcards(jsonSchemaTransformObject(input) as OpenApiDocument),
  });
  await app.register(fastifySwaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: { url: "/openapi.json" },
  });
}

interface OpenApiDocument {
  paths?: Record<
    string,
    Record<string, { parameters?: { in: string; name: string; description?: string }[] }>
  >;
}

/**
 * Fastify's wildcard (`/files/*`) is documented as the parameter `path` (`/files/{path}`): a name a client
 * generator can use, which may contain slashes (the file's path in the workspace, URL-encoded per segment).
 */
function namedWildcards<T extends OpenApiDocument>(doc: T): T {
  if (doc.paths === undefined) return doc;
  const paths: NonNullable<OpenApiDocument["paths"]> = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const operation of Object.values(item)) {
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in === "path" && parameter.name === "*") {
          parameter.name = "path";
          parameter.description = "The file's path in the workspace (it may contain '/')";
        }
      }
    }
    paths[path.replace("{*}", "{path}")] = item;
  }
  return { ...doc, paths };
}

/** GET /openapi.json: the OpenAPI 3 document generated from the route schemas. */
export const openApiRoutes: FastifyPluginAsyncZod<ServerContext> = async (app) => {
  app.get(
    "/openapi.json",
    {
      schema: {
        summary: "This API's OpenAPI 3 document",
        security: [],
        response: answers({ 200: z.looseObject({ openapi: z.string(), paths: z.looseObject({}) }) }),
      },
    },
    async () => app.swagger() as unknown as { openapi: string; paths: Record<string, unknown> },
  );
};
