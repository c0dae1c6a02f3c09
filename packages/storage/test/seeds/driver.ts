// Runs the vendored seed modules in a child process (their DATA_DIR is fixed at import): argv <op> [arg].
// Prints one JSON line: {"ok":true,"value":…} or {"ok":false,"message":…,"status":…}.
import * as creates from "./boat-create-idempotency.ts";
import * as deletes from "./boat-delete-journal.ts";

const [op, arg] = process.argv.slice(2);
const BODY = '{"ttlSeconds":28800,"noEnv":true}';

function run(): unknown {
  switch (op) {
    case "write-sample": {
      // A data directory as the seeds' own code leaves it: keys, a Boat remembered and resolved, fences.
      const a = creates.beginBoatCreate("seed-a", BODY).request;
      const remembered = creates.rememberCreatedBoat(a, "bx_aaaaaaaa");
      creates.resolveBoatCreate(remembered);
      creates.beginBoatCreate("seed-b", BODY);
      creates.beginBoatCreate("seed-c", '{"ttlSeconds":7200}');
      deletes.prepareBoatDeletion({ boxId: "bx_bbbbbbbb", name: "ogb-old", ownerBotId: "seed-b" });
      deletes.markBoatDeletionAccepted("bx_bbbbbbbb", {
        id: `bdop_${"c".repeat(32)}`,
        kind: "sandbox",
        targetId: "bx_bbbbbbbb",
        status: "processing",
      });
      deletes.prepareBoatDeletion({ boxId: "bx_cccccccc", name: "stray", ownerBotId: null });
      return { creates: creates.boatCreateRecoverySnapshot().length, deletes: deletes.boatDeletionSnapshot().length };
    }
    case "begin":
      return creates.beginBoatCreate(arg as string, BODY).startedNow;
    case "prepare":
      return deletes.prepareBoatDeletion({ boxId: arg as string, name: "n", ownerBotId: null }).phase;
    default:
      throw new Error(`unknown op ${op}`);
  }
}

try {
  process.stdout.write(`${JSON.stringify({ ok: true, value: run() })}\n`);
} catch (error) {
  const e = error as Error & { status?: number };
  process.stdout.write(`${JSON.stringify({ ok: false, message: e.message, status: e.status })}\n`);
}
