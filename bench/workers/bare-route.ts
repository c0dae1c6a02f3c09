/**
 * The bare Fastify route of bench/lib/get-compare.ts, in a process of its own as the bot server is (so
 * neither shares a thread with autocannon): `bare-route.ts <path> <content-type> <body-file>` answers GET
 * <path> with the body file's bytes and prints `listening <url>` once it listens on loopback.
 */
import { readFileSync } from "node:fs";
import Fastify from "fastify";

const [path, contentType, bodyFile] = process.argv.slice(2);
if (path === undefined || contentType === undefined || bodyFile === undefined) {
  throw new Error("usage: bare-route.ts <path> <content-type> <body-file>");
}
const body = readFileSync(bodyFile);
const app = Fastify({ logger: false });
app.get(path, async (_request, reply) => reply.header("content-type", contentType).send(body));
const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`listening ${url}\n`);
process.on("SIGTERM", () => {
  void app.close().then(() => process.exit(0));
});
