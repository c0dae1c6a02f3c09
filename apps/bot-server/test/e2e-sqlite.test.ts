// The end-to-end suite (e2e-suite.ts) on the sqlite backend (<dataDir>/drydock.sqlite).
import { e2eSuite } from "./e2e-suite.js";

e2eSuite("sqlite");
