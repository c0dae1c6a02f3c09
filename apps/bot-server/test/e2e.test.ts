// The end-to-end suite (e2e-suite.ts) on the default backend, file (today's JSON files).
import { e2eSuite } from "./e2e-suite.js";

e2eSuite("file");
