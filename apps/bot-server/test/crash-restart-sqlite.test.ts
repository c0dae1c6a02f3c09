// The crash-restart suite (crash-restart-suite.ts) on the sqlite backend (<dataDir>/drydock.sqlite): a
// SIGKILL mid-transaction, at most one Boat per bot, no lost fence, no half-restored workspace.
import { crashRestartSuite } from "./crash-restart-suite.js";

crashRestartSuite("sqlite");
